"""One episode: create the run, build its graph, run it to the end (or resume it), and record the outcome.

This is the one place the CLI, the eval runner and Python users go through, so a run started from any of
them is stored, resumable and shown the same way.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from .. import registry
from ..policies.base import Policy, PolicyError, load, slow_to_load
from ..policies.settings import settled
from ..runs import Store
from ..spec import Reach, TaskSpec
from ..spec_molecules import MOL_MIME, graph_files, listed, read_graphs
from ..state import TERMINAL, AgentState, Message
from ..tools.registry import ToolContext, ToolError, select_tools
from . import get_agent
from .base import Agent
from .events import Failed, Loading, Resumed, Started
from .nodes import Runtime
from .reach import checked_spec


@dataclass
class RunResult:
    run_id: str
    status: str
    answer: str | None
    steps: int
    tokens_in: int
    tokens_out: int
    seconds: float
    error: str | None = None

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


class EpisodeError(RuntimeError):
    """The episode could not start: bad spec content, unknown agent or tool, a model that cannot load."""


def _sandbox_options(kind: str, values: dict):
    """The spec's sandbox.options as the kind's typed Options (sandboxes/base.py: its limits and its own
    options), read once before anything starts; a ValueError naming each bad field."""
    from ..sandboxes.base import read_options

    return read_options(registry.load("sandbox", kind), values, kind)


def open_sandbox(kind: str, options):
    """Start a sandbox of `kind` (registry kind "sandbox") with `options`: its typed Options, or a mapping that
    is read into them here (an MCP session's)."""
    from ..sandboxes.base import SandboxError, SandboxOptions, open_sandbox

    try:
        cls = registry.load("sandbox", kind)
    except registry.RegistryError as err:
        raise SandboxError(str(err)) from err
    if not isinstance(options, SandboxOptions):
        options = _sandbox_options(kind, options)
    return open_sandbox(cls, options).start()


@contextmanager
def _episode_sandbox(rt: Runtime, agent: Agent, shared: object = None):
    """Open the spec's sandbox into rt.ctx.sandbox for the episode, and close it after, whatever happens.
    A `shared` sandbox (a nested run acting in its caller's browser or robot scene) is used as it is and left
    open: its owner closes it.

    Raises EpisodeError naming what is wrong; a sandbox that started and then failed is closed too (one
    whose start failed has closed itself)."""
    spec = rt.spec
    if shared is not None:
        rt.ctx.sandbox = shared
        try:
            yield
        finally:
            rt.ctx.sandbox = None
        return
    if spec.sandbox.kind == "none":
        yield
        return
    from ..sandboxes.base import SandboxError, stage_inputs

    box = None
    try:
        try:
            box = open_sandbox(spec.sandbox.kind, rt.sandbox_options)
            stage_inputs(box, list(spec.inputs.images) + list(spec.inputs.files) + list(spec.inputs.audio)
                         + graph_files(spec.inputs.graphs), rt.ctx.images)
            agent.prepare_sandbox(rt, box)  # what the agent's programs expect to find (visual_program)
        except (SandboxError, OSError, TypeError) as err:
            if isinstance(err, OSError) and err.errno == errno.ENOSPC:
                err = "the task's inputs do not fit in the sandbox's /episode (raise sandbox.options.disk_mb)"
            raise EpisodeError(f"sandbox {spec.sandbox.kind!r}: {err}") from None
        rt.ctx.sandbox = box
        yield
    finally:
        if box is not None:
            box.close()
        rt.ctx.sandbox = None


@contextmanager
def _episode_mcp_servers(rt: Runtime):
    """Start the spec's MCP servers and add their tools to the episode's; stop them when it ends.

    A server that cannot start, or a tool name that another tool already has, is an EpisodeError naming it;
    what goes wrong once the run is going becomes an error observation of the call (tools/mcp_client.py)."""
    if not rt.spec.mcp_servers:
        yield
        return
    from ..tools.mcp_client import McpServers

    servers = McpServers(rt.spec.mcp_servers)
    try:
        try:
            added = servers.start()
        except ToolError as err:
            raise EpisodeError(str(err)) from None
        for t in added:
            if t.name in rt.tools:
                raise EpisodeError(f"MCP server {t.connection.label!r} offers a tool named {t.name!r}, which this "
                                   "episode already has; set the server's `prefix` (or its `tools` allow-list)")
            rt.tools[t.name] = t
        rt.schemas = [t.schema() for t in rt.tools.values()]
        yield
    finally:
        servers.close()


def _runtime(spec: TaskSpec, run_id: str, store: Store, policy: Policy | None,
             on_event: Callable[[dict], None] | None, reach: Reach | None = None, recorded: bool = False):
    agent = get_agent(spec.agent.name)
    spec, params, fmt = _agent_params(agent, spec)
    spec = checked_spec(spec, agent, reach, recorded)  # its files: where every episode starts, before anything
    spec = settled(spec)  # each model's kind options validated once and written in full: the stored spec is what ran
    # The files the agent writes, as reach.py resolved them (absolute, links followed, within reach).
    params = params.model_copy(update={k: spec.agent.params[k] for k in agent.written_params
                                       if k in spec.agent.params})
    # Sandbox kinds an episode can run in: the registry's, in their declared order. Tools that need one (code,
    # GUI, robot) bring their kinds with them; a kind whose meta says `code` holds a Python kernel, so the
    # python tool is a default there.
    kinds = registry.declared("sandbox")
    if spec.sandbox.kind != "none" and spec.sandbox.kind not in kinds:
        raise ValueError(f"sandbox {spec.sandbox.kind!r} is not available; available: "
                         f"{', '.join(['none', *kinds])}")
    code = spec.sandbox.kind in kinds and kinds[spec.sandbox.kind].meta.get("code", False)
    options = _sandbox_options(spec.sandbox.kind, spec.sandbox.options) if spec.sandbox.kind != "none" else None
    defaults = agent.default_tools + (["python"] if code else [])
    tools = {t.name: t for t in select_tools(spec.tools, defaults)}
    # An agent that decides without a model (fast_slow's grammar planner) does not pay for loading one.
    if policy is None and agent.needs_policy(params):
        if on_event is not None and slow_to_load(spec.model):
            on_event(Loading(spec.model.name).as_dict())
        policy = load(spec.model)
    ctx = ToolContext(run_id=run_id,
                      inputs=list(spec.inputs.files) + list(spec.inputs.images) + list(spec.inputs.audio)
                      + graph_files(spec.inputs.graphs),
                      save_artifact=store.put_artifact,
                      images={f"image_{i}": p for i, p in enumerate(spec.inputs.images, 1)},
                      audio={f"audio_{i}": p for i, p in enumerate(spec.inputs.audio, 1)},
                      graphs={m.name: m for m in read_graphs(spec.inputs.graphs)})
    rt = Runtime(run_id=run_id, spec=spec, policy=policy, tools=tools, store=store, ctx=ctx, on_event=on_event,
                 format=fmt, params=params, sandbox_options=options)
    rt.context = agent.new_context(rt)
    return agent, rt


def _agent_params(agent: Agent, spec: TaskSpec):
    """The spec's agent.params as the agent's typed Params (read once: what is wrong with them, or with the spec
    for this agent, is a ValueError here); the spec with the limits and sandbox they imply; the response format.

    A format with a turn limit of its own (DeepEyesV2: 9) applies it unless the spec sets max_steps; the spec
    that is stored carries the limit, so a resumed run keeps it."""
    from ..policies.formats import get_format

    params = agent.check_spec(spec)
    if params is None:  # a check_spec that only checks (an agent written before typed params): read them here
        params = agent.read_params(spec.agent.params)
    fmt = get_format(agent.response_format(params))
    if fmt.max_steps and "max_steps" not in spec.limits.model_fields_set:
        spec = spec.model_copy(deep=True)
        spec.limits.max_steps = fmt.max_steps
    # An agent that needs a sandbox (visual_program runs programs) gets it unless the spec names one.
    if agent.sandbox and "sandbox" not in spec.model_fields_set:
        from ..spec import SandboxSpec

        spec = spec.model_copy(deep=True)
        spec.sandbox = SandboxSpec(kind=agent.sandbox)
    return spec, params, fmt


def _first_messages(rt: Runtime, system_prompt: str) -> list[Message]:
    images = [rt.store.put_artifact(p, name=p.name) for p in rt.spec.inputs.images]
    text = rt.spec.instruction
    if rt.spec.inputs.files:
        text += "\n\nInput files (read them with read_file): " + ", ".join(p.name for p in rt.spec.inputs.files)
    if rt.spec.inputs.urls:
        text += "\n\nURLs: " + ", ".join(rt.spec.inputs.urls)
    if rt.spec.inputs.images and set(rt.tools) - {"final_answer"}:
        # Tools take images by name; a model that is not told the names guesses the file names (seen with
        # Qwen2.5-Coder-1.5B calling spatial_query(images=["room_1.jpg", ...])).
        text += "\n\nImages (tools take them by these names): " + ", ".join(
            f"image_{i} ({p.name})" for i, p in enumerate(rt.spec.inputs.images, 1))
    # Audio is kept as artifacts (the viewer plays them) and named for the speech tools, which read it by name.
    audio = [rt.store.put_artifact(p, name=f"audio_{i}{p.suffix}") for i, p in enumerate(rt.spec.inputs.audio, 1)]
    if audio:
        text += "\n\nAudio (tools take it by these names): " + ", ".join(
            f"audio_{i} ({p.name})" for i, p in enumerate(rt.spec.inputs.audio, 1))
    # Molecules are kept as MOL blocks (the viewer draws them) and listed as canonical SMILES: what a text model
    # reads, and the names the chemistry tools take.
    graphs = [rt.store.put_artifact(m.molblock.encode(), name=f"{m.name}.mol", mime=MOL_MIME)
              for m in rt.ctx.graphs.values()]
    if graphs:
        text += "\n\nMolecules (tools take them by these names), as canonical SMILES:\n"
        text += listed(rt.ctx.graphs.values())
    return [Message(role="system", content=system_prompt),
            Message(role="user", content=text, images=images, audio=audio, graphs=graphs)]


def _drive(graph, rt: Runtime, graph_input, run_id: str) -> RunResult:
    config = {"configurable": {"thread_id": run_id}, "recursion_limit": 4 * rt.spec.limits.max_steps + 16}
    store = rt.store
    try:
        # durability="async" writes each checkpoint on LangGraph's background thread while the loop prepares
        # the next step, and every node first waits for the previous step's commit (Runtime.wait_durable): no
        # node acts before the step before it is on disk, so kill -9 loses at most the node that was running.
        final: AgentState = graph.invoke(graph_input, config, durability="async" if rt.deferred else "sync")
    except Exception as err:  # a bug or a crash inside a node: the run is failed, not lost
        from langgraph.errors import GraphRecursionError

        store.commit_deferred(run_id)
        snapshot = graph.get_state(config).values or {}
        if isinstance(err, GraphRecursionError):
            # LangGraph's own text points at a LangChain troubleshooting page; say what the run did instead.
            status = "budget_exhausted"
            error = (f"the agent's graph made {config['recursion_limit']} node visits without finishing "
                     f"({snapshot.get('steps', 0)} steps recorded); raise limits.max_steps or check why it loops")
        else:
            status, error = "failed", f"{type(err).__name__}: {err}"
        store.update_run(run_id, status=status, error=error)
        rt.emit(Failed(error))
        return RunResult(run_id, status, None, snapshot.get("steps", 0), snapshot.get("tokens_in", 0),
                         snapshot.get("tokens_out", 0), snapshot.get("seconds", 0.0), error)
    return _finish(store, run_id, final)


def _finish(store: Store, run_id: str, final: dict) -> RunResult:
    store.commit_deferred(run_id)  # a last policy row of a run without a checkpointer
    result = RunResult(run_id=run_id, status=final["status"], answer=final.get("answer"), steps=final["steps"],
                       tokens_in=final["tokens_in"], tokens_out=final["tokens_out"], seconds=final["seconds"],
                       error=final.get("error"))
    store.update_run(run_id, status=result.status, answer=result.answer, error=result.error, steps=result.steps,
                     tokens_in=result.tokens_in, tokens_out=result.tokens_out, seconds=result.seconds)
    if result.status in TERMINAL:
        store.prune_checkpoints(run_id)
    return result


def run_episode(spec: TaskSpec, store: Store, on_event: Callable[[dict], None] | None = None,
                policy: Policy | None = None, eval_id: str | None = None, run_id: str | None = None,
                parent: tuple[str, int] | None = None, sandbox: object = None,
                reach: Reach | None = None) -> RunResult:
    """Run a task to its end. Raises EpisodeError (nothing stored) if it cannot start.

    `reach` names the folders the task's files may be in (the spec's folder and the user's --allow-path ones,
    or a data set's): each input must be a regular file inside them, and a file its agent writes must be
    inside them or $TOOLPATH_HOME (agents/reach.py); without one, inputs are checked as files only and an
    agent writes only under $TOOLPATH_HOME.

    A nested run (agents/capabilities.py) names its `parent` (run id, step seq) and may act in the caller's
    `sandbox` instead of opening the one its spec names."""
    try:
        agent, rt = _runtime(spec, run_id or "", store, policy, on_event, reach)
    except (PolicyError, ToolError, ValueError) as err:
        raise EpisodeError(str(err)) from err
    with _episode_sandbox(rt, agent, sandbox), _episode_mcp_servers(rt):
        spec = rt.spec  # with the limits its agent parameters imply
        rt.run_id = run_id = store.create_run(spec.to_json(), spec.id, spec.model.name, spec.agent.name, run_id,
                                              eval_id, parent)
        rt.ctx.run_id = run_id
        rt.emit(Started(run_id, spec.model.name, spec.agent.name))
        first = _first_messages(rt, agent.system_prompt(rt.spec, rt.params))
        rt.record(0, "task", first, time.time(), 0.0)
        graph = agent.build(rt, checkpointer=store.checkpointer())
        return _drive(graph, rt, agent.initial_state(), run_id)


def resume_episode(run_id: str, store: Store, on_event: Callable[[dict], None] | None = None,
                   policy: Policy | None = None, sandbox: object = None, nested: bool = False) -> RunResult:
    """Continue a run from its last checkpoint. Completed steps are neither repeated nor lost.

    A nested run resumes with its parent (`nested` is the capability tool of the parent's step doing so)."""
    run = store.find_run(run_id)
    if run is None:
        raise EpisodeError(f"no run with id {run_id!r} in {store.db_path}")
    run_id = run["id"]
    if run.get("parent_id") and not nested:
        raise EpisodeError(f"run {run_id} is nested in run {run['parent_id']} (step {run['parent_seq']}); resume "
                           f"that one and it resumes this: toolpath resume {run['parent_id']}")
    spec = TaskSpec.model_validate_json(run["spec"])
    if run["status"] == "running":
        raise EpisodeError(f"run {run_id} is still running in process {run['pid']}; resume it once that has ended")
    if run["status"] in TERMINAL:
        return RunResult(run_id, run["status"], run["answer"], run["steps"], run["tokens_in"], run["tokens_out"],
                         run["seconds"], run["error"])
    try:  # the recorded spec's files were checked when it started: only a link put in since is refused now
        agent, rt = _runtime(spec, run_id, store, policy, on_event, recorded=True)
    except (PolicyError, ToolError, ValueError) as err:
        raise EpisodeError(str(err)) from err
    # a fresh kernel: the killed one's variables are gone
    with _episode_sandbox(rt, agent, sandbox), _episode_mcp_servers(rt):
        return _resume(agent, rt, store, run_id)


def _resume(agent: Agent, rt: Runtime, store: Store, run_id: str) -> RunResult:
    store.update_run(run_id, status="running", pid=os.getpid())
    graph = agent.build(rt, checkpointer=store.checkpointer())
    config = {"configurable": {"thread_id": run_id}}
    snapshot = graph.get_state(config)
    values = snapshot.values or {}
    if not values:  # killed before the first checkpoint: start the graph over on the recorded task
        store.drop_steps_after(run_id, 0)
        rt.transcript = store.transcript(run_id)
        if not rt.transcript:
            rt.record(0, "task", _first_messages(rt, agent.system_prompt(rt.spec, rt.params)), time.time(), 0.0)
        rt.emit(Resumed(run_id, 0))
        return _drive(graph, rt, agent.initial_state(), run_id)
    dropped = store.drop_steps_after(run_id, values["seq"])
    store.checkpointer().mark_durable(run_id, values["seq"])  # what we resume from is on disk already
    rt.transcript = store.transcript(run_id)
    agent.resume(rt)
    rt.emit(Resumed(run_id, values["steps"], dropped, values["tokens_in"] + values["tokens_out"]))
    if not snapshot.next:  # the graph had ended; only the run row was not updated before the kill
        return _finish(store, run_id, values)
    return _drive(graph, rt, None, run_id)
