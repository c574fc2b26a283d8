"""Runs OpenStack Placement's own gabbi suite against real Placement and against berth.

    run.py placement --json OUT          every gabbi file against Placement, in this process
    run.py berth --berth BIN --json OUT  every gabbi file against a fresh berth of its own
    run.py compare PLACEMENT.json BERTH.json --expected-failures F --known-failures K

The gabbi files and the fixtures are those of the installed ``openstack-placement``. Against
Placement they run as Placement's ``test_api`` runs them (its fixtures, its WSGI application in
process, ``noauth2``). Against berth each file gets a new server (``--auth noauth2``, Placement
at the root of ``--placement-listen``, an empty SQLite database), and its fixture's data is
created over HTTP (``berth_fixtures``). A test is named ``file.yaml #N name``.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

import yaml
from gabbi import handlers, suitemaker, utils

import placement

GABBITS = os.path.join(os.path.dirname(placement.__file__), "tests", "functional", "gabbits")
HERE = os.path.dirname(os.path.abspath(__file__))
# A debug build on a loaded machine may take a while to open its database.
START_TIMEOUT_S = 90
# berth's flags for the fixtures that configure Placement's policy. Placement's APIFixture, which
# every other fixture builds on, runs oslo.policy with enforce_new_defaults=False (the deprecated
# defaults too: DEFAULT_FLAGS); SecureRBACPolicyFixture with True, Placement's and berth's default.
LEGACY_FLAGS = ["--policy", os.path.join(HERE, "legacy-policy.toml")]
FIXTURE_FLAGS = {
    "OpenPolicyFixture": ["--policy", os.path.join(HERE, "open-policy.toml")],
    "SecureRBACPolicyFixture": [],
    "LegacyRBACPolicyFixture": LEGACY_FLAGS,
}
DEFAULT_FLAGS = LEGACY_FLAGS
# berth's flags for the fixtures that configure something else (added to the policy's).
EXTRA_FLAGS = {
    "CORSFixture": ["--cors-allowed-origin", "http://valid.example.com"],
}


class Outcomes(unittest.TestResult):
    """Records each test's outcome and, for the ones that did not pass, why."""

    def __init__(self, file_name):
        super().__init__()
        self.file_name = file_name
        self.seen = {}

    def _key(self, test):
        index = getattr(test, "gabbi_index", 0)
        return "%s #%d %s" % (self.file_name, index, test.test_data["name"])

    def _note(self, test, outcome, detail=""):
        self.seen[self._key(test)] = {"outcome": outcome, "detail": detail[-1500:]}

    def addSuccess(self, test):
        self._note(test, "pass")

    def addFailure(self, test, err):
        self._note(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        self._note(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        # A fixture that failed is reported as an error of the file's first test, then every
        # test as skipped: keep the error, which says why.
        if self.seen.get(self._key(test), {}).get("outcome") != "error":
            self._note(test, "skip", str(reason))

    def addExpectedFailure(self, test, err):
        self._note(test, "xfail")

    def addUnexpectedSuccess(self, test):
        self._note(test, "xpass")


def gabbi_files(only):
    names = sorted(n for n in os.listdir(GABBITS) if n.endswith(".yaml"))
    return [n for n in names if not only or n in only]


def build(file_name, host, port, fixture_module, intercept, inner_fixtures=None):
    """The file's tests, as gabbi's own loader builds them."""
    suite_dict = utils.load_yaml(yaml_file=os.path.join(GABBITS, file_name), safe=True)
    if intercept:
        host = str(uuid.uuid4())
    suite = suitemaker.test_suite_from_dict(
        unittest.TestLoader(),
        file_name[: -len(".yaml")],
        suite_dict,
        GABBITS,
        host,
        port,
        fixture_module,
        intercept,
        handlers=[handler() for handler in handlers.RESPONSE_HANDLERS],
        test_loader_name="placement_gabbi",
        inner_fixtures=inner_fixtures,
    )
    for index, test in enumerate(_tests(suite), start=1):
        type(test).gabbi_index = index
    return suite


def _tests(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _tests(item)
        else:
            yield item


def run_placement(only):
    from oslotest import output
    from placement.tests.functional.fixtures import capture
    from placement.tests.functional.fixtures import gabbits as fixtures

    results = {}
    for name in gabbi_files(only):
        suite = build(
            name,
            None,
            None,
            fixtures,
            fixtures.setup_app,
            inner_fixtures=[output.CaptureOutput, capture.Logging],
        )
        outcomes = Outcomes(name)
        suite.run(outcomes)
        results.update(outcomes.seen)
    return results


class Berth:
    """A berth serving Placement at the root of a loopback port, for one file."""

    def __init__(self, binary, flags):
        self.dir = tempfile.TemporaryDirectory(prefix="berth-gabbi-")
        # Appending: berth writes at the end whatever offset the reads below leave (with "w+"
        # the file's one offset is shared, and a write after a `seek(0)` overwrote the log).
        self.log = open(os.path.join(self.dir.name, "log"), "a+")
        # berth announces Placement's port at `info`; keep that line whatever BERTH_LOG says.
        log_filter = os.environ.get("BERTH_LOG", "warn")
        env = dict(os.environ, NO_COLOR="1", BERTH_LOG_FORMAT="text", BERTH_LOG=log_filter + ",berth_server=info")
        self.process = subprocess.Popen(
            [
                binary,
                "serve",
                "--data-dir",
                self.dir.name,
                "--listen",
                "127.0.0.1:0",
                "--placement-listen",
                "127.0.0.1:0",
                "--auth",
                "noauth2",
            ]
            + flags,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.port = self._placement_port()

    def _placement_port(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self.log.seek(0)
            text = re.sub(r"\x1b\[[0-9;]*m", "", self.log.read())
            found = re.search(r"placement_addr=127\.0\.0\.1:(\d+)", text)
            if found:
                return int(found.group(1))
            if self.process.poll() is not None:
                raise RuntimeError("berth exited at start:\n" + text)
            time.sleep(0.05)
        self.log.seek(0)
        text = self.log.read()
        self.stop()
        raise RuntimeError("berth did not start within %d s:\n%s" % (START_TIMEOUT_S, text[-3000:]))

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        self.dir.cleanup()


def run_berth(binary, only):
    sys.path.insert(0, HERE)
    import berth_fixtures

    fixtures = berth_fixtures.install()
    results = {}
    for name in gabbi_files(only):
        with open(os.path.join(GABBITS, name)) as stream:
            classes = yaml.safe_load(stream).get("fixtures") or []
        policies = [FIXTURE_FLAGS[c] for c in classes if c in FIXTURE_FLAGS]
        flags = (policies[0] if policies else DEFAULT_FLAGS) + [
            flag for c in classes for flag in EXTRA_FLAGS.get(c, [])
        ]
        server = Berth(binary, flags)
        try:
            berth_fixtures.BASE = "http://127.0.0.1:%d" % server.port
            suite = build(name, "127.0.0.1", server.port, fixtures, None)
            outcomes = Outcomes(name)
            suite.run(outcomes)
            results.update(outcomes.seen)
        finally:
            server.stop()
    return results


def read_list(path):
    """`file.yaml #N name  # reason` lines: the test and why."""
    entries = {}
    if not path or not os.path.exists(path):
        return entries
    for line in open(path):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        test, _, reason = line.partition("  # ")
        entries[test.strip()] = reason.strip()
    return entries


def compare(placement_json, berth_json, expected_path, known_path, write_known, report_path):
    placement_results = json.load(open(placement_json))
    berth_results = json.load(open(berth_json))
    expected = read_list(expected_path)
    known = read_list(known_path)
    # Only the files that ran say anything about their tests.
    ran = {k.split(" #")[0] for k in berth_results}
    baseline = sorted(
        k
        for k, v in placement_results.items()
        if v["outcome"] in ("pass", "xfail") and k.split(" #")[0] in ran
    )
    failing = [
        k
        for k in baseline
        if berth_results.get(k, {"outcome": "missing"})["outcome"]
        != placement_results[k]["outcome"]
    ]
    unexpected = [k for k in failing if k not in expected and k not in known]
    stale = [k for k in list(expected) + list(known) if k.split(" #")[0] in ran and k not in failing]
    kept = [k for k in known if k.split(" #")[0] not in ran]
    files = {k.split(" #")[0] for k in berth_results}
    lines = []
    for key in failing:
        got = berth_results.get(key, {"outcome": "missing", "detail": ""})
        mark = "expected" if key in expected else "known" if key in known else "NEW"
        lines.append("== %s [%s: %s]\n%s\n" % (key, mark, got["outcome"], got.get("detail", "")))
    if report_path:
        with open(report_path, "w") as stream:
            stream.write("\n".join(lines))
    if write_known:
        with open(known_path, "w") as stream:
            stream.write(
                "# Tests that pass on Placement and do not yet pass on berth (see README).\n"
                "# Regenerated by `scripts/placement-gabbi.sh --update-known`; the list only shrinks.\n"
            )
            for key in sorted(kept + [k for k in failing if k not in expected]):
                stream.write("%s\n" % key)
    passed = len(baseline) - len(failing)
    print(
        "placement-gabbi: %d files; Placement passes %d tests; berth passes %d of them "
        "(%d expected failures, %d known failures, %d new failures, %d listed but passing)"
        % (
            len(files),
            len(baseline),
            passed,
            sum(1 for k in failing if k in expected),
            sum(1 for k in failing if k in known and k not in expected),
            len(unexpected),
            len(stale),
        )
    )
    for key in unexpected:
        print("  NEW FAILURE: %s" % key)
    for key in stale:
        print("  LISTED BUT PASSING (remove it from the list): %s" % key)
    if write_known:
        return 0
    return 1 if (unexpected or stale) else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("placement")
    p.add_argument("--json", required=True)
    p.add_argument("only", nargs="*")
    b = sub.add_parser("berth")
    b.add_argument("--berth", required=True)
    b.add_argument("--json", required=True)
    b.add_argument("only", nargs="*")
    c = sub.add_parser("compare")
    c.add_argument("placement_json")
    c.add_argument("berth_json")
    c.add_argument("--expected-failures")
    c.add_argument("--known-failures")
    c.add_argument("--update-known", action="store_true")
    c.add_argument("--report")
    args = parser.parse_args()
    if args.mode == "compare":
        return compare(
            args.placement_json,
            args.berth_json,
            args.expected_failures,
            args.known_failures,
            args.update_known,
            args.report,
        )
    results = run_placement(args.only) if args.mode == "placement" else run_berth(args.berth, args.only)
    with open(args.json, "w") as stream:
        json.dump(results, stream, indent=1, sort_keys=True)
    counts = {}
    for value in results.values():
        counts[value["outcome"]] = counts.get(value["outcome"], 0) + 1
    print("%s: %s" % (args.mode, ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
