"""Built-in fix planners, one module each, registered as ``gpudoctor.fixes`` entry points.

A planner is pure: ``plan(facts, finding, options) -> FixPlan | None``; only
:mod:`gpudoctor.apply` writes files.
"""
