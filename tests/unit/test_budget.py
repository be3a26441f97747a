"""--max-time planning (train/budget.py) on simulated step times: when it plans, what length,
and a budget spent by a machine that got slower."""

from gptkit.train.budget import FIRST_PLAN_STEPS, PLAN_AT, UNPLANNED, TimeBudget


def simulate(step_seconds, budget=100.0):
    """Run the loop's side of a TimeBudget: steps of step_seconds(step) seconds, a sync where the
    budget asks for one; (the plans made as (step, total), the last step, the clock then)."""
    b = TimeBudget(budget, f"{budget:g}s", first_step=0)
    clock, previous, total, step, plans = 0.0, 0.0, UNPLANNED, 0, []
    while step < total:
        clock += step_seconds(step)
        step += 1
        if b.due(step) or step == total:
            b.synced(previous, step)  # rank 0's clock at the previous sync travels with this one
            b.clock_pending, previous = clock, clock
            if planned := b.plan(step, total):
                plans.append((step, planned[0]))
                total = planned[0]
    return plans, step, clock


def test_a_steady_run_plans_early_then_at_fractions_and_ends_on_time():
    plans, last, clock = simulate(lambda step: 0.1)
    first_step, first_total = plans[0]
    assert first_step <= FIRST_PLAN_STEPS + 3 and abs(first_total - 1000) <= 2
    assert len(plans) <= 1 + len(PLAN_AT) and all(abs(total - 1000) <= 2 for _, total in plans)
    assert 99.0 <= clock <= 100.5 and last == plans[-1][1]


def test_a_machine_that_gets_slower_ends_within_two_steps_of_its_budget():
    for slow in (1.0, 3.0):  # 10x and 30x slower from the middle of the run on
        plans, last, clock = simulate(lambda step, slow=slow: 0.1 if step < 500 else slow)
        assert last < 1000 and clock <= 100 + 2 * slow  # at most the two steps that reach min_lr past it
        assert plans[-1] == (last - 2, last)  # the last plan: the budget is spent


def test_a_faster_machine_gets_more_steps_in_a_later_plan():
    plans, last, clock = simulate(lambda step: 0.2 if step < 100 else 0.1)
    assert plans[0][1] < plans[-1][1] == last and clock <= 100.5
