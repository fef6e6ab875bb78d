#!/usr/bin/env python3
"""Generate the embedded grade-school math data set of the `gsm8k` example.

The problems are our own: templated, multi-step word problems with randomised names, items and
numbers, written in GSM8K's format. Each record is `{"question": ..., "answer": ...}` where the
answer is a worked solution (with GSM8K's `<<expr=value>>` calculator annotations) whose last line
is `#### N`. Every template computes its answer with integer arithmetic and asserts that each
intermediate step is a whole number, so the gold answers are exact.

Run from anywhere; it rewrites train.jsonl and test.jsonl next to this script:

    python3 examples/data/gsm8k/generate.py

The output is deterministic (fixed seed), so re-running it changes nothing.
"""

import json
import os
import random

SEED = 20240611
N_TRAIN = 160
N_TEST = 50

NAMES = [
    "Amara", "Ben", "Carlos", "Dana", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jamal",
    "Kira", "Liam", "Mei", "Noor", "Oscar", "Priya", "Quinn", "Rosa", "Sven", "Tariq",
    "Uma", "Victor", "Wen", "Ximena", "Yusuf", "Zoe",
]


def calc(expr, value):
    """A GSM8K-style calculation: `expr = <<expr=value>>value`."""
    return f"{expr} = <<{expr}={value}>>{value}"


def whole(num, den):
    """Exact integer division; templates only pick numbers for which it is exact."""
    assert num % den == 0, (num, den)
    return num // den


def two_names(r):
    a, b = r.sample(NAMES, 2)
    return a, b


def t_bakery(r):
    name = r.choice(NAMES)
    item = r.choice(["muffins", "bagels", "cupcakes", "loaves of bread", "pretzels"])
    mon = r.randrange(20, 90, 2)
    factor_word, factor = r.choice([("twice", 2), ("three times", 3)])
    tue = mon * factor
    wed = whole(tue, 2)
    total = mon + tue + wed
    q = (f"{name}'s bakery sold {mon} {item} on Monday. On Tuesday it sold {factor_word} as many "
         f"{item} as on Monday, and on Wednesday it sold half as many as on Tuesday. "
         f"How many {item} did the bakery sell over the three days?")
    steps = [
        f"On Tuesday the bakery sold {calc(f'{mon}*{factor}', tue)} {item}.",
        f"On Wednesday it sold {calc(f'{tue}/2', wed)} {item}.",
        f"Altogether it sold {calc(f'{mon}+{tue}+{wed}', total)} {item}.",
    ]
    return q, steps, total


def t_wage(r):
    name = r.choice(NAMES)
    job = r.choice(["tutoring", "walking dogs", "washing cars", "babysitting", "gardening"])
    rate = r.randint(8, 25)
    hours = r.randint(2, 6)
    days = r.randint(3, 6)
    earned = rate * hours * days
    spend = r.randrange(10, earned // 2, 5)
    left = earned - spend
    q = (f"{name} earns ${rate} an hour {job}. This week {name} worked {hours} hours on each of "
         f"{days} days, then spent ${spend} on a birthday present. How many dollars does {name} "
         f"have left from this week's earnings?")
    per_day = rate * hours
    steps = [
        f"Each day {name} earned {calc(f'{rate}*{hours}', per_day)} dollars.",
        f"Over {days} days that is {calc(f'{per_day}*{days}', earned)} dollars.",
        f"After the present, {name} has {calc(f'{earned}-{spend}', left)} dollars left.",
    ]
    return q, steps, left


def t_change(r):
    name = r.choice(NAMES)
    item = r.choice(["pencils", "markers", "stickers", "erasers", "notebooks"])
    packs = r.randint(2, 7)
    per_pack = r.randint(3, 12)
    price = r.randint(2, 9)
    cost = packs * price
    bill = r.choice([b for b in (20, 50, 100) if b > cost])
    change = bill - cost
    q = (f"{name} buys {packs} packs of {item}. Each pack holds {per_pack} {item} and costs ${price}. "
         f"{name} pays with a ${bill} bill. How much change, in dollars, does {name} get back?")
    steps = [
        f"The packs cost {calc(f'{packs}*{price}', cost)} dollars in total.",
        f"The change is {calc(f'{bill}-{cost}', change)} dollars.",
    ]
    return q, steps, change


def t_garden(r):
    name = r.choice(NAMES)
    plant = r.choice(["tomato plants", "sunflowers", "pepper plants", "rose bushes", "lettuce heads"])
    rows = r.randint(4, 12)
    per_row = r.randint(5, 15)
    total = rows * per_row
    den = r.choice([d for d in (2, 3, 4, 5, 6) if total % d == 0] or [1])
    if den == 1:
        return None
    lost = whole(total, den)
    bought = r.randint(3, 20)
    final = total - lost + bought
    frac = {2: "half", 3: "a third", 4: "a quarter", 5: "a fifth", 6: "a sixth"}[den]
    q = (f"{name} planted {rows} rows of {plant} with {per_row} in each row. A storm ruined {frac} "
         f"of them, so {name} bought {bought} new ones and planted those too. How many {plant} "
         f"does {name} have now?")
    steps = [
        f"{name} first planted {calc(f'{rows}*{per_row}', total)} {plant}.",
        f"The storm ruined {calc(f'{total}/{den}', lost)} of them.",
        f"Now there are {calc(f'{total}-{lost}+{bought}', final)} {plant}.",
    ]
    return q, steps, final


def t_savings(r):
    name = r.choice(NAMES)
    thing = r.choice(["a bicycle", "a tablet", "a telescope", "a guitar", "a pair of skates"])
    weekly = r.randint(5, 30)
    weeks = r.randint(4, 20)
    have = r.randint(10, 120)
    goal = have + weekly * weeks
    q = (f"{name} wants to buy {thing} that costs ${goal}. {name} already has ${have} and saves "
         f"${weekly} every week. How many weeks will it take {name} to have exactly enough money?")
    need = goal - have
    steps = [
        f"{name} still needs {calc(f'{goal}-{have}', need)} dollars.",
        f"At {weekly} dollars a week that takes {calc(f'{need}/{weekly}', weeks)} weeks.",
    ]
    return q, steps, weeks


def t_reading(r):
    name = r.choice(NAMES)
    d1 = r.randint(3, 7)
    p1 = r.randint(10, 30)
    p2 = r.randint(p1 + 5, p1 + 25)
    d2 = r.randint(2, 9)
    pages = d1 * p1 + d2 * p2
    q = (f"A book has {pages} pages. {name} reads {p1} pages a day for the first {d1} days, and "
         f"then speeds up to {p2} pages a day. How many more days does {name} need after the "
         f"first {d1} days to finish the book?")
    read = d1 * p1
    rest = pages - read
    steps = [
        f"In the first {d1} days {name} reads {calc(f'{d1}*{p1}', read)} pages.",
        f"That leaves {calc(f'{pages}-{read}', rest)} pages.",
        f"At {p2} pages a day that takes {calc(f'{rest}/{p2}', d2)} more days.",
    ]
    return q, steps, d2


def t_ages(r):
    a, b = two_names(r)
    b_age = r.randint(6, 40)
    diff = r.randint(2, 15)
    years = r.randint(2, 12)
    a_age = b_age + diff
    a_f = a_age + years
    b_f = b_age + years
    total = a_f + b_f
    q = (f"{a} is {diff} years older than {b}. {b} is {b_age} years old now. What will the sum of "
         f"their ages be in {years} years?")
    steps = [
        f"{a} is {calc(f'{b_age}+{diff}', a_age)} years old now.",
        f"In {years} years {a} will be {calc(f'{a_age}+{years}', a_f)} and {b} will be "
        f"{calc(f'{b_age}+{years}', b_f)}.",
        f"The sum of their ages will be {calc(f'{a_f}+{b_f}', total)}.",
    ]
    return q, steps, total


def t_discount(r):
    name = r.choice(NAMES)
    item = r.choice(["jackets", "lamps", "backpacks", "board games", "headphones"])
    pct = r.choice([10, 20, 25, 30, 40, 50])
    price = r.choice([p for p in range(20, 201, 4) if p * pct % 100 == 0])
    qty = r.randint(2, 5)
    off = whole(price * pct, 100)
    sale = price - off
    total = sale * qty
    q = (f"A store sells {item} for ${price} each. During a sale everything is {pct}% off. "
         f"{name} buys {qty} {item} during the sale. How many dollars does {name} spend?")
    steps = [
        f"The discount on one is {calc(f'{price}*{pct}/100', off)} dollars.",
        f"Each one costs {calc(f'{price}-{off}', sale)} dollars on sale.",
        f"{qty} of them cost {calc(f'{sale}*{qty}', total)} dollars.",
    ]
    return q, steps, total


def t_class(r):
    teacher = r.choice(NAMES)
    den = r.choice([2, 3, 4, 5])
    students = den * r.randint(5, 9)
    part = whole(students, den)
    rest = students - part
    each = r.randint(2, 6)
    frac = {2: "Half", 3: "One third", 4: "One quarter", 5: "One fifth"}[den]
    item = r.choice(["crayons", "stickers", "apples", "bookmarks"])
    total = rest * each
    q = (f"There are {students} students in Ms. {teacher}'s class. {frac} of them went on a field "
         f"trip. Each student who stayed behind gets {each} {item}. How many {item} are handed out?")
    steps = [
        f"{calc(f'{students}/{den}', part)} students went on the trip.",
        f"{calc(f'{students}-{part}', rest)} students stayed behind.",
        f"They get {calc(f'{rest}*{each}', total)} {item}.",
    ]
    return q, steps, total


def t_drive(r):
    name = r.choice(NAMES)
    s1 = r.randrange(30, 70, 5)
    h1 = r.randint(1, 4)
    s2 = r.randrange(40, 75, 5)
    h2 = r.randint(1, 3)
    d1 = s1 * h1
    d2 = s2 * h2
    total = d1 + d2
    q = (f"{name} drives at {s1} miles per hour for {h1} hours, stops for lunch, and then drives "
         f"at {s2} miles per hour for {h2} more hours. How many miles does {name} drive in all?")
    steps = [
        f"Before lunch {name} drives {calc(f'{s1}*{h1}', d1)} miles.",
        f"After lunch {name} drives {calc(f'{s2}*{h2}', d2)} miles.",
        f"In all that is {calc(f'{d1}+{d2}', total)} miles.",
    ]
    return q, steps, total


def t_recipe(r):
    name = r.choice(NAMES)
    batch = r.choice([12, 15, 18, 20, 24])
    cups = r.randint(2, 5)
    batches = r.randint(2, 8)
    cookies = batch * batches
    total = cups * batches
    q = (f"A recipe uses {cups} cups of flour to make {batch} cookies. {name} wants to bake "
         f"{cookies} cookies for a school fair. How many cups of flour does {name} need?")
    steps = [
        f"{cookies} cookies is {calc(f'{cookies}/{batch}', batches)} batches.",
        f"{name} needs {calc(f'{batches}*{cups}', total)} cups of flour.",
    ]
    return q, steps, total


def t_collection(r):
    a, b = two_names(r)
    item = r.choice(["stamps", "trading cards", "seashells", "marbles", "coins"])
    start = r.randint(30, 150)
    give = r.randint(5, start // 3)
    packs = r.randint(2, 6)
    per = r.randint(4, 12)
    got = packs * per
    final = start - give + got
    q = (f"{a} has {start} {item}. {a} gives {give} of them to {b} and then buys {packs} packs "
         f"with {per} {item} in each pack. How many {item} does {a} have now?")
    steps = [
        f"After giving some away {a} has {calc(f'{start}-{give}', start - give)} {item}.",
        f"The packs hold {calc(f'{packs}*{per}', got)} {item}.",
        f"Now {a} has {calc(f'{start - give}+{got}', final)} {item}.",
    ]
    return q, steps, final


def t_pizza(r):
    name = r.choice(NAMES)
    pizzas = r.randint(3, 8)
    slices = r.choice([6, 8, 10, 12])
    total = pizzas * slices
    people = r.randint(4, 12)
    each = r.randint(1, max(1, total // people - 1))
    eaten = people * each
    if eaten >= total:
        return None
    left = total - eaten
    q = (f"{name} orders {pizzas} pizzas for a party, and each pizza is cut into {slices} slices. "
         f"{people} guests each eat {each} slices. How many slices are left over?")
    steps = [
        f"There are {calc(f'{pizzas}*{slices}', total)} slices.",
        f"The guests eat {calc(f'{people}*{each}', eaten)} slices.",
        f"{calc(f'{total}-{eaten}', left)} slices are left over.",
    ]
    return q, steps, left


def t_fence(r):
    name = r.choice(NAMES)
    length = r.randint(8, 40)
    width = r.randint(5, 25)
    cost = r.randint(3, 15)
    perim = 2 * (length + width)
    total = perim * cost
    q = (f"{name} wants to put a fence around a rectangular yard that is {length} feet long and "
         f"{width} feet wide. Fencing costs ${cost} per foot. How many dollars will the fence cost?")
    steps = [
        f"The perimeter is {calc(f'2*({length}+{width})', perim)} feet.",
        f"The fence costs {calc(f'{perim}*{cost}', total)} dollars.",
    ]
    return q, steps, total


def t_three_people(r):
    a, b, c = r.sample(NAMES, 3)
    item = r.choice(["marbles", "books", "stickers", "pebbles", "comics"])
    x = r.randint(4, 25)
    k = r.randint(2, 4)
    fewer = r.randint(1, x * k - 1)
    bx = x * k
    cx = bx - fewer
    total = x + bx + cx
    q = (f"{a} has {x} {item}. {b} has {k} times as many {item} as {a}, and {c} has {fewer} fewer "
         f"{item} than {b}. How many {item} do the three of them have together?")
    steps = [
        f"{b} has {calc(f'{x}*{k}', bx)} {item}.",
        f"{c} has {calc(f'{bx}-{fewer}', cx)} {item}.",
        f"Together they have {calc(f'{x}+{bx}+{cx}', total)} {item}.",
    ]
    return q, steps, total


def t_water(r):
    name = r.choice(NAMES)
    wk = r.randint(4, 10)
    we = r.randint(2, 8)
    weeks = r.randint(2, 5)
    weekdays = 5 * wk
    weekend = 2 * we
    per_week = weekdays + weekend
    total = per_week * weeks
    q = (f"{name} drinks {wk} glasses of water on each weekday and {we} glasses on each day of the "
         f"weekend. How many glasses of water does {name} drink in {weeks} weeks?")
    steps = [
        f"On weekdays {name} drinks {calc(f'5*{wk}', weekdays)} glasses a week.",
        f"On the weekend {name} drinks {calc(f'2*{we}', weekend)} glasses.",
        f"That is {calc(f'{weekdays}+{weekend}', per_week)} glasses a week.",
        f"In {weeks} weeks {name} drinks {calc(f'{per_week}*{weeks}', total)} glasses.",
    ]
    return q, steps, total


def t_tickets(r):
    name = r.choice(NAMES)
    place = r.choice(["zoo", "aquarium", "museum", "water park", "science center"])
    adult = r.randint(12, 30)
    child = r.randint(5, adult - 2)
    na = r.randint(1, 3)
    nc = r.randint(1, 5)
    parking = r.randint(5, 15)
    ta = na * adult
    tc = nc * child
    total = ta + tc + parking
    q = (f"Tickets to the {place} cost ${adult} for adults and ${child} for children. {name}'s "
         f"family of {na} adults and {nc} children goes, and parking costs ${parking}. "
         f"How many dollars does the trip cost in total?")
    steps = [
        f"Adult tickets cost {calc(f'{na}*{adult}', ta)} dollars.",
        f"Children's tickets cost {calc(f'{nc}*{child}', tc)} dollars.",
        f"With parking the total is {calc(f'{ta}+{tc}+{parking}', total)} dollars.",
    ]
    return q, steps, total


def t_minutes(r):
    name = r.choice(NAMES)
    task, items = r.choice([("knit a scarf", "scarves"), ("paint a birdhouse", "birdhouses"),
                            ("frame a picture", "pictures"), ("bake a pie", "pies")])
    mins = r.choice([10, 12, 15, 20, 30, 36, 40, 45])
    count = r.choice([n for n in range(2, 41) if mins * n % 60 == 0])
    total_min = mins * count
    hours = whole(total_min, 60)
    q = (f"It takes {name} {mins} minutes to {task}. How many hours will it take {name} to make "
         f"{count} {items}?")
    steps = [
        f"It takes {calc(f'{mins}*{count}', total_min)} minutes.",
        f"That is {calc(f'{total_min}/60', hours)} hours.",
    ]
    return q, steps, hours


def t_bus(r):
    start = r.randint(15, 45)
    off1 = r.randint(2, start - 5)
    on1 = r.randint(1, 15)
    after1 = start - off1 + on1
    off2 = r.randint(1, after1 - 1)
    on2 = r.randint(0, 12)
    final = after1 - off2 + on2
    q = (f"A bus leaves the station with {start} passengers. At the first stop {off1} people get "
         f"off and {on1} get on. At the second stop {off2} people get off and {on2} get on. "
         f"How many passengers are on the bus after the second stop?")
    steps = [
        f"After the first stop there are {calc(f'{start}-{off1}+{on1}', after1)} passengers.",
        f"After the second stop there are {calc(f'{after1}-{off2}+{on2}', final)} passengers.",
    ]
    return q, steps, final


def t_average(r):
    name = r.choice(NAMES)
    target = r.randint(70, 92)
    s = [r.randint(max(50, target - 20), min(100, target + 15)) for _ in range(3)]
    need = 4 * target - sum(s)
    if not 0 <= need <= 100:
        return None
    total = 4 * target
    have = sum(s)
    q = (f"{name} scored {s[0]}, {s[1]} and {s[2]} on the first three quizzes. What score does "
         f"{name} need on the fourth quiz to have an average of exactly {target}?")
    steps = [
        f"An average of {target} over 4 quizzes needs {calc(f'4*{target}', total)} points.",
        f"{name} has {calc(f'{s[0]}+{s[1]}+{s[2]}', have)} points so far.",
        f"{name} needs {calc(f'{total}-{have}', need)} on the fourth quiz.",
    ]
    return q, steps, need


def t_split_money(r):
    name = r.choice(NAMES)
    kids = r.randint(2, 5)
    den = r.choice([3, 4, 5])
    share = r.randint(4, 30)
    rest = share * kids
    # rest is what is left after spending 1/den, so total = rest * den / (den - 1).
    if (rest * den) % (den - 1):
        return None
    total = whole(rest * den, den - 1)
    spent = whole(total, den)
    frac = {3: "a third", 4: "a quarter", 5: "a fifth"}[den]
    q = (f"{name} made ${total} at a yard sale. {name} spent {frac} of it on snacks and split the "
         f"rest equally among {kids} siblings. How many dollars did each sibling get?")
    steps = [
        f"{name} spent {calc(f'{total}/{den}', spent)} dollars on snacks.",
        f"{calc(f'{total}-{spent}', rest)} dollars were left.",
        f"Each sibling got {calc(f'{rest}/{kids}', share)} dollars.",
    ]
    return q, steps, share


def t_raise(r):
    name = r.choice(NAMES)
    pct = r.choice([5, 10, 20, 25])
    pay = r.choice([p for p in range(400, 2001, 20) if p * pct % 100 == 0])
    months = r.choice([3, 6, 12])
    inc = whole(pay * pct, 100)
    new = pay + inc
    total = new * months
    q = (f"{name} earns ${pay:,} a month and gets a {pct}% raise. How many dollars will {name} earn "
         f"in the next {months} months at the new pay?")
    steps = [
        f"The raise is {calc(f'{pay}*{pct}/100', inc)} dollars a month.",
        f"The new pay is {calc(f'{pay}+{inc}', new)} dollars a month.",
        f"In {months} months {name} earns {calc(f'{new}*{months}', total)} dollars.",
    ]
    return q, steps, total


def t_eggs(r):
    name = r.choice(NAMES)
    hens = r.randint(3, 15)
    eggs = r.randint(1, 2)
    days = 7
    laid = hens * eggs * days
    dozen_price = r.randint(2, 6)
    if laid % 12:
        return None
    dozens = whole(laid, 12)
    money = dozens * dozen_price
    q = (f"{name} keeps {hens} hens, and each hen lays {eggs} egg{'s' if eggs > 1 else ''} a day. "
         f"{name} sells all the eggs laid in a week at ${dozen_price} per dozen. How many dollars "
         f"does {name} make in a week?")
    per_day = hens * eggs
    steps = [
        f"The hens lay {calc(f'{hens}*{eggs}', per_day)} eggs a day.",
        f"In a week they lay {calc(f'{per_day}*7', laid)} eggs.",
        f"That is {calc(f'{laid}/12', dozens)} dozen.",
        f"{name} makes {calc(f'{dozens}*{dozen_price}', money)} dollars.",
    ]
    return q, steps, money


TEMPLATES = [
    t_bakery, t_wage, t_change, t_garden, t_savings, t_reading, t_ages, t_discount, t_class,
    t_drive, t_recipe, t_collection, t_pizza, t_fence, t_three_people, t_water, t_tickets,
    t_minutes, t_bus, t_average, t_split_money, t_raise, t_eggs,
]


def generate():
    r = random.Random(SEED)
    seen = set()
    records = []
    want = N_TRAIN + N_TEST
    while len(records) < want:
        for template in TEMPLATES:
            if len(records) >= want:
                break
            made = template(r)
            if made is None:
                continue
            q, steps, ans = made
            assert isinstance(ans, int) and ans >= 0, (template.__name__, ans)
            if q in seen:
                continue
            seen.add(q)
            records.append({"question": q, "answer": "\n".join(steps) + f"\n#### {ans}"})
    r.shuffle(records)
    return records[:N_TRAIN], records[N_TRAIN:]


def write(path, records):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    train, test = generate()
    write(os.path.join(here, "train.jsonl"), train)
    write(os.path.join(here, "test.jsonl"), test)
    print(f"wrote {len(train)} train and {len(test)} test problems to {here}")


if __name__ == "__main__":
    main()
