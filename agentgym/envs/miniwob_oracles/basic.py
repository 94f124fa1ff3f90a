"""Oracles of the simplest MiniWoB++ tasks: the pattern the other oracle modules follow."""

from __future__ import annotations

from agentgym.envs.miniwob_oracles.base import NoOracleMove, OracleView, norm, oracle, typed


@oracle("click-test", "click-test-transfer")
def click_test(view: OracleView) -> str:
    return f"click[{view.one(tag='button').ref}]"


@oracle("click-button")
def click_button(view: OracleView) -> str:
    target = view.fields.get("target") or view.quoted()[0]
    for e in view.find(tag=("button", "input_button", "input_submit")):
        if norm(e.text) == norm(target) or norm(str(e.value)) == norm(target):
            return f"click[{e.ref}]"
    raise NoOracleMove(f"no button {target!r}")


@oracle("enter-text")
def enter_text(view: OracleView) -> str:
    field = view.one(tag="input_text")
    return typed(view, field, view.fields["target"]) or f"click[{view.submit().ref}]"


@oracle("choose-list")
def choose_list(view: OracleView) -> str:
    target = view.fields["target"]
    select = view.one(tag="select")
    options = select.options or ()
    if select.selected and norm(options[select.selected[0]]) == norm(target):
        return f"click[{view.submit().ref}]"
    return f"select[{select.ref}, {target}]"
