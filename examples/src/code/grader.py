# The grading harness of the `code` example, run with `python3 -I` in a fresh sandbox holding a
# copy of the agent's files. Standard input: {"function": NAME, "mark": MARK, "cases": [ARGS...]}
# (the arguments only: the expected values stay with the server). For each case it calls the
# function and prints one line, MARK then {"case": i, "value": V} (V as JSON) or
# {"case": i, "error": "..."}; the server compares V with the expected value.
#
# Nothing here is trusted: the graded code runs in this process and may print anything, patch
# anything or exit. It can only ever make the server see values it chose for these arguments,
# which is what solving the exercise is.
import copy
import json
import sys

request = json.load(sys.stdin)
mark = request["mark"]
write = sys.stdout.write
flush = sys.stdout.flush
dumps = json.dumps


def emit(obj):
    write(mark + dumps(obj) + "\n")
    flush()


# Only the workspace, and only now: the harness's own modules are imported already, so a
# json.py in the workspace shadows nothing it uses.
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
sys.path.insert(0, "/workspace")
try:
    import solution

    function = getattr(solution, request["function"])
except BaseException as e:  # a syntax error, a missing function, a solution that exits
    emit({"error": "importing %s from solution.py failed: %r" % (request["function"], e)})
    raise SystemExit(0)

for i, args in enumerate(request["cases"]):
    try:
        value = function(*copy.deepcopy(args))
        # Plain data only: an object that "equals everything" is not JSON.
        text = dumps(value, allow_nan=False)
    except BaseException as e:
        emit({"case": i, "error": type(e).__name__})
        continue
    write(mark + '{"case": %d, "value": %s}\n' % (i, text))
    flush()
