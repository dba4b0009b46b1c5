"""The default suite stays a pre-commit suite: no test in it takes longer than the budget in conftest.py.

Collected last (pytest collects test files in name order), it reads the durations of every test that ran
before it in this session. A test over the budget either gets faster or moves under the `slow` or `e2e`
marker, which `.ci/run` runs (`pytest -m "e2e or slow"`); run alone, this test has nothing to judge and passes.
"""

from conftest import SLOWEST_TEST_BUDGET_S


def over_budget(durations: dict[str, float], budget: float) -> list[str]:
    return [f"{nodeid}: {seconds:.1f} s" for nodeid, seconds in sorted(durations.items(), key=lambda kv: -kv[1])
            if seconds > budget]


def test_over_budget_names_each_test_past_the_budget_slowest_first():
    durations = {"a.py::fast": 1.0, "b.py::slow": 45.5, "c.py::slower": 80.0, "d.py::edge": 30.0}
    assert over_budget(durations, 30.0) == ["c.py::slower: 80.0 s", "b.py::slow: 45.5 s"]


def test_no_test_of_this_session_took_longer_than_the_budget(session_durations):
    late = over_budget({k: v for k, v in session_durations.items() if "test_zz_suite_budget" not in k},
                       SLOWEST_TEST_BUDGET_S)
    assert not late, (f"{len(late)} test(s) over the default suite's {SLOWEST_TEST_BUDGET_S:.0f} s budget "
                      "(make them faster or mark them `slow`, which .ci/run runs):\n" + "\n".join(late))
