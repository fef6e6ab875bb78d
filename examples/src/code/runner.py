# The hidden test runner of the `code` example: imports solution.py from the working directory,
# evaluates each test expression in the module's namespace, and writes
# {"passed": k, "total": n, "failures": [...]} to the file named by argv[2].
import json
import os
import sys

sys.path.insert(0, os.getcwd())
tests = json.load(open(sys.argv[1]))
result = {"passed": 0, "total": len(tests), "failures": []}
try:
    import solution
    namespace = vars(solution)
except BaseException as e:  # a syntax error, or a solution that exits at import
    namespace = None
    result["failures"].append(f"importing solution.py failed: {e!r}")
if namespace is not None:
    for test in tests:
        try:
            ok = bool(eval(test, dict(namespace)))
            problem = None if ok else "false"
        except BaseException as e:
            ok, problem = False, repr(e)
        if ok:
            result["passed"] += 1
        elif len(result["failures"]) < 3:
            result["failures"].append(f"a hidden test failed ({problem})")
with open(sys.argv[2], "w") as f:
    json.dump(result, f)
