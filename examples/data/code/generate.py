#!/usr/bin/env python3
"""Generate the Python exercises of the `code` example.

Each exercise is ours: a function to write, its signature, a description, hidden tests and a
reference solution (the full text of a correct `solution.py`). A hidden test is plain data: the
arguments the function is called with and the value it must return, both JSON, compared by the
grader outside the sandbox the graded code runs in (src/code/grading.rs: numbers as numbers,
within 1e-9 for floats; true is not 1). Before writing, every reference solution is run against
its tests with that comparison, so no exercise ships unsolvable. Run from anywhere; it
rewrites train.jsonl and test.jsonl next to this script:

    python3 examples/data/code/generate.py

The output is deterministic, so re-running it changes nothing.
"""

import json
import os

EXERCISES = [
    ("add", "def add(a: int, b: int) -> int", "Return the sum of a and b.",
     "def add(a, b):\n    return a + b\n",
     [((1, 2), 3), ((-5, 5), 0), ((0, 0), 0), ((10 ** 12, 1), 1000000000001)]),
    ("is_even", "def is_even(n: int) -> bool", "Return True if n is even.",
     "def is_even(n):\n    return n % 2 == 0\n",
     [((2,), True), ((7,), False), ((0,), True), ((-3,), False)]),
    ("reverse_string", "def reverse_string(s: str) -> str", "Return s reversed.",
     "def reverse_string(s):\n    return s[::-1]\n",
     [(('abc',), 'cba'), (('',), ''), (('a',), 'a'), (('racecar',), 'racecar')]),
    ("factorial", "def factorial(n: int) -> int", "Return n! for n >= 0.",
     "def factorial(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r\n",
     [((0,), 1), ((1,), 1), ((5,), 120), ((10,), 3628800)]),
    ("fibonacci", "def fibonacci(n: int) -> int",
     "Return the n-th Fibonacci number, with fibonacci(0) == 0 and fibonacci(1) == 1.",
     "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
     [((0,), 0), ((1,), 1), ((10,), 55), ((50,), 12586269025)]),
    ("is_palindrome", "def is_palindrome(s: str) -> bool",
     "Return True if s reads the same backwards, ignoring case and non-alphanumeric characters.",
     "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n",
     [(('A man, a plan, a canal: Panama',), True), (('hello',), False), (('',), True), (('No lemon, no melon',), True)]),
    ("count_vowels", "def count_vowels(s: str) -> int", "Count the vowels (a, e, i, o, u, any case) in s.",
     "def count_vowels(s):\n    return sum(1 for c in s.lower() if c in 'aeiou')\n",
     [(('hello',), 2), (('',), 0), (('AEIOU',), 5), (('rhythm',), 0)]),
    ("max_of_list", "def max_of_list(xs: list[int]) -> int | None",
     "Return the largest element of xs, or None if xs is empty (without using max()).",
     "def max_of_list(xs):\n    best = None\n    for x in xs:\n        if best is None or x > best:\n            best = x\n    return best\n",
     [(([1, 5, 3],), 5), (([],), None), (([-2, -7],), -2), (([4],), 4)]),
    ("fizzbuzz", "def fizzbuzz(n: int) -> list[str]",
     "Return the FizzBuzz strings for 1..n: 'Fizz' for multiples of 3, 'Buzz' for 5, 'FizzBuzz' for both, else the number.",
     "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n        s = ('Fizz' if i % 3 == 0 else '') + ('Buzz' if i % 5 == 0 else '')\n        out.append(s or str(i))\n    return out\n",
     [((5,), ['1', '2', 'Fizz', '4', 'Buzz']), ((15,), ['1', '2', 'Fizz', '4', 'Buzz', 'Fizz', '7', '8', 'Fizz', 'Buzz', '11', 'Fizz', '13', '14', 'FizzBuzz']), ((0,), []), ((3,), ['1', '2', 'Fizz'])]),
    ("is_prime", "def is_prime(n: int) -> bool", "Return True if n is a prime number.",
     "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n        if n % i == 0:\n            return False\n        i += 1\n    return True\n",
     [((2,), True), ((1,), False), ((97,), True), ((91,), False), ((-7,), False)]),
    ("gcd", "def gcd(a: int, b: int) -> int", "Return the greatest common divisor of two non-negative integers.",
     "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n",
     [((12, 18), 6), ((7, 13), 1), ((0, 5), 5), ((100, 10), 10)]),
    ("lcm", "def lcm(a: int, b: int) -> int", "Return the least common multiple of two positive integers.",
     "def lcm(a, b):\n    x, y = a, b\n    while y:\n        x, y = y, x % y\n    return a * b // x\n",
     [((4, 6), 12), ((7, 3), 21), ((5, 5), 5), ((1, 9), 9)]),
    ("sum_digits", "def sum_digits(n: int) -> int", "Return the sum of the decimal digits of n (n may be negative).",
     "def sum_digits(n):\n    return sum(int(c) for c in str(abs(n)))\n",
     [((123,), 6), ((0,), 0), ((-45,), 9), ((9999,), 36)]),
    ("count_words", "def count_words(s: str) -> dict[str, int]",
     "Count how often each whitespace-separated word occurs in s, case-insensitively (keys lower-case).",
     "def count_words(s):\n    out = {}\n    for w in s.lower().split():\n        out[w] = out.get(w, 0) + 1\n    return out\n",
     [(('a b a',), {'a': 2, 'b': 1}), (('',), {}), (('The the THE',), {'the': 3}), (('x  y',), {'x': 1, 'y': 1})]),
    ("flatten", "def flatten(xss: list) -> list", "Flatten arbitrarily nested lists into one flat list.",
     "def flatten(xss):\n    out = []\n    for x in xss:\n        if isinstance(x, list):\n            out.extend(flatten(x))\n        else:\n            out.append(x)\n    return out\n",
     [(([1, [2, [3, 4]], 5],), [1, 2, 3, 4, 5]), (([],), []), (([[[]]],), []), (([['a'], 'b'],), ['a', 'b'])]),
    ("unique_sorted", "def unique_sorted(xs: list[int]) -> list[int]", "Return the distinct elements of xs in ascending order.",
     "def unique_sorted(xs):\n    return sorted(set(xs))\n",
     [(([3, 1, 3, 2],), [1, 2, 3]), (([],), []), (([5, 5],), [5]), (([-1, 0, -1],), [-1, 0])]),
    ("binary_search", "def binary_search(xs: list[int], target: int) -> int",
     "Return the index of target in the sorted list xs, or -1 if it is absent.",
     "def binary_search(xs, target):\n    lo, hi = 0, len(xs) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if xs[mid] == target:\n            return mid\n        if xs[mid] < target:\n            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1\n",
     [(([1, 3, 5, 7], 5), 2), (([1, 3, 5, 7], 4), -1), (([], 1), -1), ((list(range(1000)), 999), 999)]),
    ("merge_sorted", "def merge_sorted(a: list[int], b: list[int]) -> list[int]", "Merge two sorted lists into one sorted list.",
     "def merge_sorted(a, b):\n    i = j = 0\n    out = []\n    while i < len(a) and j < len(b):\n        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n",
     [(([1, 4], [2, 3]), [1, 2, 3, 4]), (([], [1]), [1]), (([], []), []), (([1, 1], [1]), [1, 1, 1])]),
    ("capitalize_words", "def capitalize_words(s: str) -> str",
     "Upper-case the first letter of every space-separated word, lower-case the rest.",
     "def capitalize_words(s):\n    return ' '.join(w[:1].upper() + w[1:].lower() for w in s.split(' '))\n",
     [(('hello world',), 'Hello World'), (('',), ''), (('aBC dEF',), 'Abc Def'), (('x',), 'X')]),
    ("roman_to_int", "def roman_to_int(s: str) -> int", "Convert a Roman numeral (I to MMMCMXCIX) to an integer.",
     "def roman_to_int(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n    total = 0\n    for i, c in enumerate(s):\n        if i + 1 < len(s) and v[c] < v[s[i + 1]]:\n            total -= v[c]\n        else:\n            total += v[c]\n    return total\n",
     [(('III',), 3), (('IV',), 4), (('MCMXCIV',), 1994), (('LVIII',), 58)]),
    ("int_to_roman", "def int_to_roman(n: int) -> str", "Convert an integer from 1 to 3999 to a Roman numeral.",
     "def int_to_roman(n):\n    pairs = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'),\n             (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n    out = ''\n    for v, s in pairs:\n        while n >= v:\n            out += s\n            n -= v\n    return out\n",
     [((3,), 'III'), ((4,), 'IV'), ((1994,), 'MCMXCIV'), ((3999,), 'MMMCMXCIX')]),
    ("anagrams", "def anagrams(a: str, b: str) -> bool", "Return True if a and b are anagrams of each other, ignoring case and spaces.",
     "def anagrams(a, b):\n    norm = lambda s: sorted(s.replace(' ', '').lower())\n    return norm(a) == norm(b)\n",
     [(('listen', 'silent'), True), (('abc', 'abd'), False), (('Dormitory', 'dirty room'), True), (('', ''), True)]),
    ("rotate_list", "def rotate_list(xs: list, k: int) -> list", "Rotate xs to the right by k places (k may exceed the length).",
     "def rotate_list(xs, k):\n    if not xs:\n        return []\n    k %= len(xs)\n    return xs[-k:] + xs[:-k] if k else list(xs)\n",
     [(([1, 2, 3, 4], 1), [4, 1, 2, 3]), (([1, 2, 3], 3), [1, 2, 3]), (([], 5), []), (([1, 2, 3], 4), [3, 1, 2])]),
    ("chunk", "def chunk(xs: list, size: int) -> list[list]", "Split xs into consecutive chunks of length size (the last may be shorter).",
     "def chunk(xs, size):\n    return [xs[i:i + size] for i in range(0, len(xs), size)]\n",
     [(([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]), (([], 3), []), (([1], 1), [[1]]), (([1, 2, 3], 5), [[1, 2, 3]])]),
    ("second_largest", "def second_largest(xs: list[int]) -> int | None",
     "Return the second largest distinct value of xs, or None if there is none.",
     "def second_largest(xs):\n    s = sorted(set(xs))\n    return s[-2] if len(s) >= 2 else None\n",
     [(([1, 3, 2],), 2), (([5, 5],), None), (([],), None), (([4, 4, 1],), 1)]),
    ("run_length_encode", "def run_length_encode(s: str) -> str",
     "Encode runs of equal characters as count then character: 'aaab' -> '3a1b'.",
     "def run_length_encode(s):\n    out = ''\n    i = 0\n    while i < len(s):\n        j = i\n        while j < len(s) and s[j] == s[i]:\n            j += 1\n        out += f'{j - i}{s[i]}'\n        i = j\n    return out\n",
     [(('aaab',), '3a1b'), (('',), ''), (('abc',), '1a1b1c'), (('zzzzzz',), '6z')]),
    ("balanced_brackets", "def balanced_brackets(s: str) -> bool",
     "Return True if every (, [ and { in s is closed in the right order; other characters are ignored.",
     "def balanced_brackets(s):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for c in s:\n        if c in '([{':\n            stack.append(c)\n        elif c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n                return False\n    return not stack\n",
     [(('([]{})',), True), (('(]',), False), (('',), True), (('((',), False), (('a(b)c',), True)]),
    ("transpose", "def transpose(m: list[list[int]]) -> list[list[int]]", "Return the transpose of a rectangular matrix.",
     "def transpose(m):\n    return [list(r) for r in zip(*m)]\n",
     [(([[1, 2], [3, 4]],), [[1, 3], [2, 4]]), (([[1, 2, 3]],), [[1], [2], [3]]), (([],), []), (([[5]],), [[5]])]),
    ("celsius_to_fahrenheit", "def celsius_to_fahrenheit(c: float) -> float", "Convert degrees Celsius to Fahrenheit.",
     "def celsius_to_fahrenheit(c):\n    return c * 9 / 5 + 32\n",
     [((0,), 32.0), ((100,), 212.0), ((-40,), -40.0), ((37,), 98.6)]),
    ("digits_to_words", "def digits_to_words(n: int) -> str",
     "Spell each decimal digit of a non-negative n as an English word, separated by spaces: 42 -> 'four two'.",
     "def digits_to_words(n):\n    names = 'zero one two three four five six seven eight nine'.split()\n    return ' '.join(names[int(c)] for c in str(n))\n",
     [((42,), 'four two'), ((0,), 'zero'), ((907,), 'nine zero seven'), ((11,), 'one one')]),
    ("pascal_row", "def pascal_row(n: int) -> list[int]", "Return row n (0-based) of Pascal's triangle.",
     "def pascal_row(n):\n    row = [1]\n    for _ in range(n):\n        row = [a + b for a, b in zip([0] + row, row + [0])]\n    return row\n",
     [((0,), [1]), ((1,), [1, 1]), ((4,), [1, 4, 6, 4, 1]), ((10,), [1, 10, 45, 120, 210, 252, 210, 120, 45, 10, 1])]),
    ("caesar_cipher", "def caesar_cipher(s: str, k: int) -> str",
     "Shift each ASCII letter of s by k places in the alphabet (wrapping, keeping case); other characters stay.",
     "def caesar_cipher(s, k):\n    out = []\n    for c in s:\n        if 'a' <= c <= 'z':\n            out.append(chr((ord(c) - 97 + k) % 26 + 97))\n        elif 'A' <= c <= 'Z':\n            out.append(chr((ord(c) - 65 + k) % 26 + 65))\n        else:\n            out.append(c)\n    return ''.join(out)\n",
     [(('abc', 1), 'bcd'), (('xyz', 3), 'abc'), (('Hello, World!', 13), 'Uryyb, Jbeyq!'), (('abc', -1), 'zab')]),
    ("prime_factors", "def prime_factors(n: int) -> list[int]", "Return the prime factors of n >= 2 in ascending order, with repeats.",
     "def prime_factors(n):\n    out = []\n    d = 2\n    while d * d <= n:\n        while n % d == 0:\n            out.append(d)\n            n //= d\n        d += 1\n    if n > 1:\n        out.append(n)\n    return out\n",
     [((12,), [2, 2, 3]), ((13,), [13]), ((100,), [2, 2, 5, 5]), ((2,), [2])]),
    ("matrix_multiply", "def matrix_multiply(a: list[list[int]], b: list[list[int]]) -> list[list[int]]",
     "Multiply two matrices given as lists of rows (their sizes match).",
     "def matrix_multiply(a, b):\n    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]\n",
     [(([[1, 2], [3, 4]], [[5, 6], [7, 8]]), [[19, 22], [43, 50]]), (([[1]], [[2]]), [[2]]), (([[1, 0], [0, 1]], [[4, 5], [6, 7]]), [[4, 5], [6, 7]]), (([[1, 2, 3]], [[1], [1], [1]]), [[6]])]),
    ("longest_common_prefix", "def longest_common_prefix(words: list[str]) -> str", "Return the longest prefix shared by all words ('' for none or an empty list).",
     "def longest_common_prefix(words):\n    if not words:\n        return ''\n    p = words[0]\n    for w in words[1:]:\n        while not w.startswith(p):\n            p = p[:-1]\n    return p\n",
     [((['flower', 'flow', 'flight'],), 'fl'), ((['dog', 'car'],), ''), (([],), ''), ((['same', 'same'],), 'same')]),
    ("two_sum", "def two_sum(xs: list[int], target: int) -> tuple[int, int] | None",
     "Return indices (i, j), i < j, of the first pair (by i, then j) with xs[i] + xs[j] == target, or None.",
     "def two_sum(xs, target):\n    for i in range(len(xs)):\n        for j in range(i + 1, len(xs)):\n            if xs[i] + xs[j] == target:\n                return (i, j)\n    return None\n",
     [(([2, 7, 11, 15], 9), (0, 1)), (([3, 2, 4], 6), (1, 2)), (([1, 2], 7), None), (([], 0), None)]),
    ("moving_average", "def moving_average(xs: list[float], k: int) -> list[float]",
     "Return the averages of every window of k consecutive elements of xs.",
     "def moving_average(xs, k):\n    return [sum(xs[i:i + k]) / k for i in range(len(xs) - k + 1)]\n",
     [(([1, 2, 3, 4], 2), [1.5, 2.5, 3.5]), (([5], 1), [5.0]), (([1, 2], 3), []), (([2, 4, 6], 3), [4.0])]),
    ("to_binary", "def to_binary(n: int) -> str", "Return the binary representation of a non-negative n, without a prefix.",
     "def to_binary(n):\n    return bin(n)[2:]\n",
     [((0,), '0'), ((5,), '101'), ((255,), '11111111'), ((1024,), '10000000000')]),
    ("vowel_positions", "def vowel_positions(s: str) -> list[int]", "Return the indices of the vowels (aeiou, any case) in s.",
     "def vowel_positions(s):\n    return [i for i, c in enumerate(s) if c.lower() in 'aeiou']\n",
     [(('hello',), [1, 4]), (('',), []), (('AbE',), [0, 2]), (('xyz',), [])]),
    ("staircase", "def staircase(n: int) -> str",
     "Return n lines joined by newlines; line i (1-based) is n - i spaces then i '#' characters.",
     "def staircase(n):\n    return '\\n'.join(' ' * (n - i) + '#' * i for i in range(1, n + 1))\n",
     [((1,), '#'), ((3,), '  #\n ##\n###'), ((0,), ''), ((2,), ' #\n##')]),
    ("dedupe_keep_order", "def dedupe_keep_order(xs: list) -> list", "Remove repeated elements of xs, keeping the first occurrence of each, in order.",
     "def dedupe_keep_order(xs):\n    seen = set()\n    out = []\n    for x in xs:\n        if x not in seen:\n            seen.add(x)\n            out.append(x)\n    return out\n",
     [(([3, 1, 3, 2, 1],), [3, 1, 2]), (([],), []), ((['a', 'a'],), ['a']), (([1, 2],), [1, 2])]),
    ("word_lengths", "def word_lengths(s: str) -> list[int]", "Return the length of each whitespace-separated word of s.",
     "def word_lengths(s):\n    return [len(w) for w in s.split()]\n",
     [(('a bb ccc',), [1, 2, 3]), (('',), []), (('  hi  ',), [2]), (('one two',), [3, 3])]),
    ("collatz_steps", "def collatz_steps(n: int) -> int",
     "Return how many Collatz steps (n -> n/2 if even, else 3n+1) it takes to reach 1 from n >= 1.",
     "def collatz_steps(n):\n    steps = 0\n    while n != 1:\n        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n    return steps\n",
     [((1,), 0), ((2,), 1), ((6,), 8), ((27,), 111)]),
    ("sum_of_squares", "def sum_of_squares(n: int) -> int", "Return 1^2 + 2^2 + ... + n^2 for n >= 0.",
     "def sum_of_squares(n):\n    return sum(i * i for i in range(1, n + 1))\n",
     [((0,), 0), ((3,), 14), ((10,), 385), ((1,), 1)]),
    ("title_to_snake", "def title_to_snake(s: str) -> str", "Convert CamelCase to snake_case: 'HelloWorld' -> 'hello_world'.",
     "def title_to_snake(s):\n    out = ''\n    for i, c in enumerate(s):\n        if c.isupper() and i > 0:\n            out += '_'\n        out += c.lower()\n    return out\n",
     [(('HelloWorld',), 'hello_world'), (('A',), 'a'), (('',), ''), (('ParseHTTP',), 'parse_h_t_t_p')]),
]

N_TEST = 10


def same(got, want):
    """The grader's comparison (src/code/grading.rs), on values as JSON reads them."""
    if isinstance(got, bool) or isinstance(want, bool) or got is None or want is None:
        return type(got) is type(want) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        if isinstance(got, int) and isinstance(want, int):
            return got == want
        return abs(got - want) <= 1e-9 * max(1.0, abs(got), abs(want))
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in got)
    return type(got) is type(want) and got == want


def as_json(value):
    return json.loads(json.dumps(value, allow_nan=False))


def check(function, solution, tests):
    ns = {}
    exec(solution, ns)
    for args, expected in tests:
        got = as_json(ns[function](*args))
        assert same(got, as_json(expected)), f"{function}{args}: {got!r}, not {expected!r}"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    records = []
    for function, signature, description, solution, tests in EXERCISES:
        check(function, solution, tests)
        records.append({
            "function": function,
            "signature": signature,
            "description": description,
            "tests": [{"args": as_json(list(a)), "expected": as_json(e)} for a, e in tests],
            "solution": solution,
        })
    names = [r["function"] for r in records]
    assert len(set(names)) == len(names), "duplicate exercise"
    # Every fourth-from-the-end goes to test, so both splits mix easy and harder ones.
    test = [r for i, r in enumerate(records) if i % 4 == 3][:N_TEST]
    train = [r for r in records if r not in test]
    for split, rows in (("train", train), ("test", test)):
        with open(os.path.join(here, f"{split}.jsonl"), "w") as f:
            for i, r in enumerate(rows):
                f.write(json.dumps({"id": f"{split}-{i}", **r}) + "\n")
    print(f"{len(train)} train and {len(test)} test exercises")


if __name__ == "__main__":
    main()
