"""The node kit every agent graph is built from.

    node(rt, fn)            the node LangGraph runs: waits for the previous step's commit, then fn(state, step)
                            with a `Step` whose clock has started and whose `record` stores the step row
    rt.ask(...)             every policy call, with the spec's generation settings
    execute_calls(...)      a step's tool calls under the run's deadline, each observed, emitted and reported
    compile_graph(...)      the agent's graph with its nodes and routes, rt.deferred set for its checkpointer
    make_policy_node / make_tool_node, the budget and loop guards: the ReAct loop's shared nodes

Nodes close over a `Runtime` (the policy, the tools, the store, the in-memory transcript, the agent's own
context), which is rebuilt for every process that runs or resumes an episode; only `AgentState` is
checkpointed. Each node writes its step row (keyed by `seq`) before it returns, so the store holds every
completed step, and a node that is killed before its checkpoint simply runs again and overwrites its own row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..deadline import BUDGET_SPENT, passed
from ..policies.base import Policy, PolicyError
from ..policies.formats import FORMATS
from ..runs import Store
from ..spec import TaskSpec
from ..state import AgentState, Message, Observation, ToolCall
from ..tools.registry import Tool, ToolContext, ToolError, ToolResult
from .events import Event, Failed, PolicyStep, Thinking, ToolStep
from .user_turns import answer_or_next_turn


@dataclass
class Runtime:
    run_id: str
    spec: TaskSpec
    policy: Policy
    tools: dict[str, Tool]
    store: Store
    ctx: ToolContext
    transcript: list[Message] = field(default_factory=list)
    on_event: Callable[[dict], None] | None = None  # each event as Event.as_dict() gives it
    # True when a StoreSaver checkpoints the graph: step rows then commit with the node's checkpoint.
    deferred: bool = False
    format: Any = FORMATS["json"]  # the response grammar policies speak in this run (policies.formats)
    # The agent's own per-process state (Agent.new_context: a dataclass per agent), never checkpointed.
    context: Any = None
    # The spec's agent.params as the agent's typed Params, read once by Agent.check_spec before the run starts.
    params: Any = None
    # The spec's sandbox.options as its kind's typed Options (sandboxes/base.py), read once with the params.
    sandbox_options: Any = None
    # The pure tools' calls this process has answered (repeat_key), so a repeat gets the result it already has
    # (run_call). Not checkpointed: after a resume the first repeat runs again, which a pure tool allows.
    answered: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.schemas = [t.schema() for t in self.tools.values()]

    def wait_durable(self, state: AgentState) -> None:
        """Before a node acts, the step before it must be committed (see StoreSaver.wait_durable)."""
        if self.deferred:
            self.store.checkpointer().wait_durable(self.run_id, state["seq"])

    def emit(self, event: Event | dict) -> None:
        """Tell the caller; a mapping is a nested run's event, relayed as it came (capabilities.py)."""
        if self.on_event is not None:
            self.on_event(event.as_dict() if isinstance(event, Event) else event)

    def ask(self, messages: list[Message], tools: list[dict], *, step: int, format: Any = None,
            observation: Any = None, seed: int | None = None, tool_choice: Any = None) -> Any:
        """One policy call, as policy step `step`, with the spec's generation settings (the seed advances with the
        step unless given). `format` is the response grammar, `observation` what a policy that declares
        `observes` reads besides the messages and `tool_choice` a call the reply must be ("required", or
        {"name": TOOL}); each is passed on only when given. Raises PolicyError."""
        self.emit(Thinking(step))
        generation: dict[str, Any] = {"temperature": self.spec.model.temperature,
                                      "max_new_tokens": self.spec.model.max_new_tokens,
                                      "seed": self.spec.seed + step if seed is None else seed, "step": step}
        if format is not None:
            generation["format"] = format
        if observation is not None:
            generation["observation"] = observation
        if tool_choice is not None:
            generation["tool_choice"] = tool_choice
        return self.policy.respond(messages, tools, **generation)

    def record(self, seq: int, node: str, messages: list[Message], started: float, seconds: float,
               tokens_in: int = 0, tokens_out: int = 0, **extra: Any) -> None:
        payload = {"messages": [m.model_dump(exclude_defaults=True) for m in messages], **extra}
        # Step rows are always deferred. With a StoreSaver they commit with the node's checkpoint; without a
        # checkpointer (nothing to resume from) a policy row waits for its tool row, one commit per round.
        self.store.put_step(self.run_id, seq, node, payload, started, seconds, tokens_in, tokens_out, defer=True)
        if not self.deferred and node != "policy":
            self.store.commit_deferred(self.run_id)
        self.transcript.extend(messages)


def record_step(rt: Runtime, state: AgentState, node: str, messages: list[Message], started: float, seconds: float,
                update: dict, **extra) -> dict:
    """Store a node's step (the next seq) and return `update` with the seq and the run's seconds advanced."""
    seq = state["seq"] + 1
    rt.record(seq, node, messages, started, seconds, **extra)
    return {**update, "seq": seq, "seconds": state["seconds"] + seconds}


class Step:
    """One run of a node: its clocks, started when the node may act, and its step record."""

    __slots__ = ("rt", "state", "started", "t0")

    def __init__(self, rt: Runtime, state: AgentState):
        self.rt, self.state = rt, state
        self.started, self.t0 = time.time(), time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def record(self, node: str, messages: list[Message], update: dict, state: AgentState | None = None,
               seconds: float | None = None, **extra: Any) -> dict:
        """Store the step (after `state`, by default the node's input) and return `update` with seq and seconds."""
        return record_step(self.rt, self.state if state is None else state, node, messages, self.started,
                           self.seconds if seconds is None else seconds, update, **extra)


def node(rt: Runtime, fn: Callable[[Any, Step], Any]) -> Callable[[Any], Any]:
    """The node LangGraph runs: wait until the step before is committed, then `fn(state, step)`.

    The wrapper takes no annotation, so LangGraph hands it the graph's whole state."""
    def run(state):
        rt.wait_durable(state)
        return fn(state, Step(rt, state))

    run.__name__ = fn.__name__
    return run


# ---- guards -------------------------------------------------------------------------------------------

def budget_exceeded(state: AgentState, spec: TaskSpec) -> str | None:
    """Why the run must end as `budget_exhausted` (the first limit of the spec it has reached), or None."""
    lim = spec.limits
    if state["steps"] >= lim.max_steps:
        return f"reached max_steps={lim.max_steps} without a final answer"
    if state["seconds"] >= lim.max_seconds:
        return f"used {state['seconds']:.1f} s of max_seconds={lim.max_seconds:g}"
    used = state["tokens_in"] + state["tokens_out"]
    if lim.max_tokens is not None and used >= lim.max_tokens:
        return f"used {used} tokens of max_tokens={lim.max_tokens}"
    return None


def step_deadline(rt: Runtime, state: AgentState) -> float:
    """The monotonic time at which what is left of the run's max_seconds runs out, counted from now; also handed
    to the tools of this step (ToolContext.deadline), so a wait, typing or a robot's path stops by it."""
    deadline = time.monotonic() + max(0.0, rt.spec.limits.max_seconds - state["seconds"])
    rt.ctx.deadline = deadline
    return deadline


def account_nested(state: AgentState, used: dict) -> dict:
    """The state's counters with what nested runs (capability tools) used added: their policy steps and tokens
    count against this run's limits. Their seconds already do: they ran inside this step."""
    if not used:
        return {}
    return {k: state[k] + used.get(k, 0) for k in ("steps", "tokens_in", "tokens_out")}


def report_not_run(calls: list[ToolCall], observations: list[dict], messages: list[Message]) -> None:
    """Tell the model, and the step's record, of each call its step had no time left to start."""
    for call in calls:
        obs = Observation(call_id=call.id, tool=call.name, content=f"{call.name}: not run: {BUDGET_SPENT}", error=True)
        observations.append(obs.model_dump(exclude_defaults=True))
        messages.append(Message(role="tool", content=obs.content, tool_call_id=call.id, name=call.name))


def not_run_summary(calls: list[ToolCall]) -> str:
    """'3 calls not run (moveTo x2, write)': the calls a step had no time for, for the run's error."""
    counts: dict[str, int] = {}
    for c in calls:
        counts[c.name] = counts.get(c.name, 0) + 1
    names = ", ".join(f"{n} x{k}" if k > 1 else n for n, k in counts.items())
    return f"{len(calls)} call{'s' if len(calls) != 1 else ''} not run ({names})"


def out_of_time(reason: str | None, skipped: list[ToolCall]) -> str | None:
    """The reason a run ends after a step: a step that left calls unstarted passed its deadline, so the budget
    is spent even when the clock says a hair less."""
    return f"{reason or BUDGET_SPENT}; {not_run_summary(skipped)}" if skipped else reason


def call_signature(calls: list[dict]) -> str:
    try:
        return json.dumps([[c["name"], c["arguments"]] for c in calls], sort_keys=True, default=str)
    except (TypeError, ValueError):  # keys that cannot be sorted together: the text is still a fine signature
        return repr([[c["name"], c["arguments"]] for c in calls])


def loop_update(state: AgentState, calls: list[dict], limit: int) -> dict:
    """Count identical consecutive tool calls; `looping` once the same call comes `limit` times in a row."""
    sig = call_signature(calls)
    repeats = state["repeats"] + 1 if sig == state["last_call"] else 1
    out: dict[str, Any] = {"last_call": sig, "repeats": repeats}
    if repeats >= limit:
        out["status"] = "looping"
        out["error"] = f"the same tool call came {repeats} times in a row: {sig[:200]}"
    return out


# ---- nodes --------------------------------------------------------------------------------------------

def first_tool_choice(first_call: str) -> Any:
    """A `first_call` setting ("auto", "required" or a tool's name) as the policy's tool_choice (None: auto)."""
    return None if first_call == "auto" else first_call if first_call == "required" else {"name": first_call}


def make_policy_node(rt: Runtime, first_call: str = "auto", last_call: str = "auto") -> Callable[[AgentState], Any]:
    """The policy step. `first_call` forces the first step's reply to be a call ("required", or a tool's name):
    a small model that answers a question about an input it cannot see without looking is made to look.
    `last_call` does the same for the step that reaches max_steps: with `final_answer`, a model that would go
    on calling tools answers from what it has instead of ending the run with none (smolagents' last step)."""
    from langgraph.types import Command

    spec = rt.spec

    def policy_step(state: AgentState, st: Step) -> Any:
        seq, step = state["seq"] + 1, state["steps"] + 1
        choice = first_tool_choice(first_call) if state["steps"] == 0 else None
        asked: list[Message] = []
        if step >= spec.limits.max_steps and last_call != "auto":
            choice = "required"
            if last_call != "required":
                # The tool is named in a line and the call merely required: prefilled up to its arguments, a small
                # model wrote final_answer's bare value (`"arguments": 99`), which no parser takes as a call.
                asked = [Message(role="user", content=f"This is your last step: call {last_call} now.")]
        try:
            resp = rt.ask(rt.transcript + asked, rt.schemas, step=step, format=rt.format, tool_choice=choice)
        except PolicyError as err:
            dt = st.seconds
            rt.record(seq, "policy", [], st.started, dt, error=str(err))
            rt.emit(Failed(str(err), step))
            return Command(update={"seq": seq, "steps": step, "pending": [], "status": "failed",
                                   "error": f"policy: {err}", "seconds": state["seconds"] + dt}, goto=END)
        messages = [*asked, Message(role="assistant", content=resp.text, tool_calls=resp.tool_calls)]
        update: dict[str, Any] = {"seq": seq, "steps": step, "pending": [c.model_dump() for c in resp.tool_calls],
                                  "tokens_in": state["tokens_in"] + resp.tokens_in,
                                  "tokens_out": state["tokens_out"] + resp.tokens_out}
        answer = resp.answer
        if answer is None and rt.format.text_is_answer and resp.text.strip():
            answer = resp.text  # plain text and no call: in this grammar, that is the answer
        if resp.issues:
            messages.append(Message(role="user", content=rt.format.feedback(resp.issues)))
        elif not resp.tool_calls:
            if answer is not None and answer.strip():  # the end of the run, or of a turn (user_turns.py)
                update.update(answer_or_next_turn(rt, answer.strip(), messages))
            else:
                messages.append(Message(role="user", content=rt.format.no_action))
        dt = st.seconds
        update["seconds"] = state["seconds"] + dt
        rt.record(seq, "policy", messages, st.started, dt, resp.tokens_in, resp.tokens_out, raw=resp.raw,
                  issues=resp.issues, latency=resp.latency_s,
                  **({"cache_bytes": resp.cache_bytes} if resp.cache_bytes is not None else {}),
                  **({"decoding": resp.decoding} if resp.decoding is not None else {}),
                  **{k: getattr(resp, k) for k in ("prefill_tokens", "reused_tokens") if getattr(resp, k) is not None})
        if "status" not in update and not update["pending"]:
            reason = budget_exceeded({**state, **update}, spec)
            if reason:
                update.update(status="budget_exhausted", error=reason)
        if rt.deferred:  # live progress for `runs list`; free when it rides on the checkpoint's transaction
            rt.store.update_run(rt.run_id, defer=True, steps=step, tokens_in=update["tokens_in"],
                                tokens_out=update["tokens_out"], seconds=update["seconds"])
        rt.emit(PolicyStep(step, dt, resp.text, resp.tokens_in, resp.tokens_out, [c.name for c in resp.tool_calls],
                           resp.issues, update.get("answer")))
        return Command(update=update, goto=after_policy({**state, **update}))

    return node(rt, policy_step)


def repeat_key(tool: Tool, arguments: Any) -> str:
    """What makes two calls of a tool the same call: its name and its arguments as validated (defaults filled in,
    so `{"audio": "audio_1"}` and the same with a default written out are one call). Raises ToolError."""
    args = tool.validate(arguments).model_dump(mode="json")
    return json.dumps([tool.name, args], sort_keys=True, default=str)


def already_answered(name: str) -> str:
    return (f"{name}: not run again: you already called {name} with these arguments; its result is above. "
            "Answer now or call something else.")


def run_call(rt: Runtime, call: ToolCall, answer_repeats: bool = True) -> tuple[Observation, ToolResult | None]:
    """Execute one call; every failure (unknown tool, bad arguments, timeout, crash) becomes an error observation.

    A pure tool's call that already succeeded in this run is not run again: a small model that repeats a call
    whose result it has is told so and moves on, before the loop guard would end the run (loop_update stays the
    backstop). Stateful tools (a screenshot, a wait, a click, a code cell) run every time, and so does every call
    with `answer_repeats` off: one a spec's author wrote, not a model."""
    tool = rt.tools.get(call.name)
    if tool is None:
        msg = f"unknown tool {call.name!r}; available tools: {', '.join(rt.tools)}"
        return Observation(call_id=call.id, tool=call.name, content=msg, error=True), None
    try:
        key = repeat_key(tool, call.arguments) if tool.pure and answer_repeats else None
        if key is not None and key in rt.answered:
            return Observation(call_id=call.id, tool=call.name, content=already_answered(call.name), error=True), None
        result = tool.call(call.arguments, rt.ctx)
    except ToolError as err:
        return Observation(call_id=call.id, tool=call.name, content=str(err), error=True), None
    except Exception as err:  # noqa: BLE001 — arguments no tool expected (a model's output): the model hears of it
        msg = f"{call.name}: {type(err).__name__}: {err}"
        return Observation(call_id=call.id, tool=call.name, content=msg, error=True), None
    if key is not None:
        rt.answered.add(key)
    return Observation(call_id=call.id, tool=call.name, content=result.content, artifacts=result.artifacts), result


@dataclass
class CallSite:
    """Where a tool call is made: the run, the state before its step and the call's place in the step. A
    capability tool runs its nested agent as a run under this step, within what the state leaves of the budget,
    and adds what it used to `used` (execute_calls returns it for the step to account)."""

    rt: Runtime
    state: AgentState
    index: int
    used: dict = field(default_factory=dict)


@dataclass
class Executed:
    """What a step's calls did: the tool messages and observations to record, and how the step stopped."""

    messages: list[Message]
    observations: list[dict]
    skipped: list[ToolCall]  # the calls the step had no time left to start
    ended_by: int | None = None  # the index of the call that ended the run (a final answer), if any
    ending: Any = None  # what that call's `act` said of the ending
    used: dict = field(default_factory=dict)  # steps and tokens nested runs of these calls used (CallSite.used)


def execute_calls(rt: Runtime, state: AgentState, calls: list[ToolCall],
                  act: Callable[[ToolCall], tuple[Observation, Any]] | None = None,
                  exempt: Callable[[ToolCall], bool] = lambda call: False, answer_repeats: bool = True) -> Executed:
    """Run a step's calls in order under what is left of the run's time (nodes.step_deadline).

    `act(call)` carries one out: (observation, None), or (observation, ending) when the call ends the run; by
    default the call runs its tool, and a final result ends the run with its content as the ending. Once the
    deadline has passed no call starts, nor any after it, unless `exempt` says it takes no time (an answer);
    those are reported as not run. The first call that ends the run ends the step too. `answer_repeats` off runs a
    pure tool's repeated call again (run_call)."""
    def run_tool(call: ToolCall) -> tuple[Observation, Any]:
        obs, result = run_call(rt, call, answer_repeats)
        return obs, result.content if result is not None and result.final else None

    act = act or run_tool
    done = Executed([], [], [])
    deadline = step_deadline(rt, state)
    for i, call in enumerate(calls):
        if passed(deadline) and not exempt(call):
            done.skipped = calls[i:]
            break
        c0 = time.perf_counter()
        # A later call of the step sees what earlier nested runs of it used: its budget and step offset follow.
        rt.ctx.caller = site = CallSite(rt, {**state, **account_nested(state, done.used)}, i)
        try:
            obs, ending = act(call)
        finally:
            rt.ctx.caller = None
        for k, v in site.used.items():
            done.used[k] = done.used.get(k, 0) + v
        done.observations.append(obs.model_dump(exclude_defaults=True))
        images = [a for a in obs.artifacts if a.mime.startswith("image/")]
        done.messages.append(Message(role="tool", content=obs.content, tool_call_id=call.id, name=call.name,
                                     images=images))
        rt.emit(ToolStep(state["steps"], call.name, time.perf_counter() - c0, obs.error, obs.content))
        if ending is not None:
            done.ended_by, done.ending = i, ending
            break
    report_not_run(done.skipped, done.observations, done.messages)
    return done


def make_tool_node(rt: Runtime) -> Callable[[AgentState], Any]:
    from langgraph.types import Command

    spec = rt.spec

    def tool_step(state: AgentState, st: Step) -> Any:
        calls = [ToolCall.model_validate(c) for c in state["pending"]]
        update: dict[str, Any] = {"pending": []}
        # A final answer, which takes no time, counts even once the budget is spent.
        done = execute_calls(rt, state, calls, exempt=lambda call: call.name == "final_answer")
        update.update(account_nested(state, done.used))
        if done.ended_by is not None:
            update.update(status="finished", answer=done.ending)
            after = [c.name for c in calls[done.ended_by + 1:]]
            if after:
                update["error"] = f"calls after final_answer were not run: {', '.join(after)}"
        update = st.record("tools", done.messages, update, observations=done.observations)
        if update.get("status") != "finished":
            update.update(loop_update(state, state["pending"], spec.limits.loop_repeats))
            reason = out_of_time(None if "status" in update else budget_exceeded({**state, **update}, spec),
                                 done.skipped)
            if reason:
                update.update(status="budget_exhausted", error=reason)
        return Command(update=update, goto=after_tools({**state, **update}))

    return node(rt, tool_step)


# ---- the graph ----------------------------------------------------------------------------------------

def compile_graph(rt: Runtime, state_type: type, nodes: dict[str, tuple[Callable, tuple[str, ...]]],
                  checkpointer: Any = None) -> Any:
    """The agent's graph: each node with the nodes it may route to (Command(goto=…)), the first one entered.

    A StoreSaver commits the step rows with each checkpoint (rt.deferred); any other checkpointer gets them
    written at once."""
    from langgraph.graph import START, StateGraph

    g = StateGraph(state_type)
    for name, (fn, destinations) in nodes.items():
        g.add_node(name, fn, destinations=destinations)
    g.add_edge(START, next(iter(nodes)))
    rt.deferred = getattr(checkpointer, "commits_store_steps", False)
    return g.compile(checkpointer=checkpointer)


# ---- routing ------------------------------------------------------------------------------------------
# Nodes route themselves (LangGraph's Command(goto=…)): measured cheaper per step than conditional edges,
# which run each router as a separate runnable.
END = "__end__"  # langgraph.graph.END, spelled out so this module imports no langgraph at load time


def after_policy(state: AgentState) -> str:
    if state["status"] != "running":
        return END
    return "tools" if state["pending"] else "policy"


def after_tools(state: AgentState) -> str:
    return END if state["status"] != "running" else "policy"
