"""The plan of a pipeline: its steps placed with their stage specs, and where each router may go.

Worked out once from the step list. `Plan.targets` / `close_targets` give each router's path map
(only the places it can really reach); `Plan.route` decides at run time, in the seed's order: a
stopped run ends at once, "search found nothing" goes to the fallback, any other error ends the
turn, otherwise the next stage whose conditions hold runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from langgraph.graph import END

from ragline.graph.context import RunContext
from ragline.graph.events import ProgressWindow
from ragline.graph.progress import close_name, open_name
from ragline.graph.stages import Parallel, Stage, StageSpec
from ragline.graph.state import ErrorKind, PipelineState, needs_retrieval

Condition = Callable[[PipelineState], bool]
FALLBACK = "fallback"


class PipelineBuildError(ValueError):
    """A pipeline the graph cannot express (e.g. a window entered past its first stage)."""


@dataclass(frozen=True)
class Step:
    stage: Stage
    conditions: tuple[Condition, ...] = ()  # AddIf: the stage runs only when all hold


@dataclass(frozen=True)
class Pipeline:
    name: str
    steps: tuple[Step, ...]

    @property
    def stages(self) -> list[Stage]:
        return [step.stage for step in self.steps]


def intent_needs_retrieval(state: PipelineState) -> bool:
    """NeedsRetrieval: the implicit condition of every stage marked needs_retrieval."""
    return needs_retrieval(state.get("intent", ""), state["request"])


@dataclass(frozen=True)
class Placed:
    """One step of the pipeline with what the graph needs to know about it."""

    step: Step
    spec: StageSpec

    @property
    def requires(self) -> frozenset[Condition]:
        extra = (intent_needs_retrieval,) if self.spec.needs_retrieval else ()
        return frozenset((*self.step.conditions, *extra))

    @property
    def window(self) -> ProgressWindow | None:
        return self.spec.window

    @property
    def entry(self) -> str:
        first = self.spec.chain[0]
        if isinstance(first, Parallel):
            raise PipelineBuildError(f"stage {self.step.stage} cannot begin with parallel branches")
        return first.node_name

    @property
    def exit(self) -> str:
        last = self.spec.chain[-1]
        if isinstance(last, Parallel):
            raise PipelineBuildError(f"stage {self.step.stage} cannot end with parallel branches: the next node must join them")
        return last.node_name

    def runs(self, state: PipelineState) -> bool:
        return all(condition(state) for condition in self.requires)


@dataclass
class Plan:
    placed: list[Placed]
    windows: dict[ProgressWindow, tuple[int, int]] = field(default_factory=dict)  # first and last step index

    @classmethod
    def of(cls, pipeline: Pipeline, stages: dict[Stage, StageSpec]) -> Plan:
        plan = cls([Placed(step, stages[step.stage]) for step in pipeline.steps if step.stage in stages])
        for index, placed in enumerate(plan.placed):
            window = placed.window
            if window is None:
                continue
            first, last = plan.windows.get(window, (index, index))
            if last not in (index, index - 1):
                raise PipelineBuildError(f"the stages of the {window.value} window must be adjacent")
            plan.windows[window] = (first, index)
        return plan

    def known_true(self, after: int, inside: ProgressWindow | None) -> frozenset[Condition]:
        """Conditions that must hold at this point: those of the step that ran, and of the window's first step."""
        known: set[Condition] = set()
        if after >= 0:
            known |= self.placed[after].requires
        if inside is not None:
            known |= self.placed[self.windows[inside][0]].requires
        return frozenset(known)

    def may_find_nothing(self, first: int, last: int) -> bool:
        return any(p.spec.finds_nothing for p in self.placed[first : last + 1])

    def entry_of(self, index: int, inside: ProgressWindow | None) -> str:
        """The node that starts step `index` when reached from within `inside` (or from no window)."""
        placed = self.placed[index]
        window = placed.window
        if window is not None and window != inside:
            if self.windows[window][0] != index:
                raise PipelineBuildError(f"{placed.step.stage} can be reached without the first stage of its {window.value} window")
            return open_name(window)
        return placed.entry

    def _walk(self, after: int, inside: ProgressWindow | None, known_true: frozenset[Condition]) -> list[str]:
        """The stage entries reachable after step `after`, in pipeline order.

        A stage whose conditions are all known to hold ends the walk; a stage skipped for a single
        unknown condition proves that condition false for the stages after it.
        """
        targets: list[str] = []
        known_false: set[Condition] = set()
        for index in range(after + 1, len(self.placed)):
            placed = self.placed[index]
            if placed.requires & known_false:
                continue  # a condition already known to fail: this stage cannot run from here
            if inside is not None and placed.window != inside:
                break  # leaving the window: its close node decides what follows
            targets.append(self.entry_of(index, inside))
            unknown = placed.requires - known_true
            if not unknown:
                break  # runs for certain: nothing after it is reachable from here
            if len(unknown) == 1:
                known_false |= unknown
        return targets

    def targets(self, after: int, inside: ProgressWindow | None) -> list[str]:
        """Every node the router after step `after` can choose (after = -1: after begin_turn)."""
        targets = self._walk(after, inside, self.known_true(after, inside))
        if inside is not None:
            targets.append(close_name(inside))  # stops, errors and the way on all leave through the card's close
        else:
            if after >= 0 and self.placed[after].spec.finds_nothing:
                targets.append(FALLBACK)
            targets.append(END)  # a stop, an error, or nothing left to run
        return list(dict.fromkeys(targets))

    def close_targets(self, window: ProgressWindow) -> list[str]:
        """Where the run goes once the window's card is closed."""
        first, last = self.windows[window]
        targets = self._walk(last, None, self.placed[first].requires)
        if self.may_find_nothing(first, last):
            targets.append(FALLBACK)
        targets.append(END)
        return list(dict.fromkeys(targets))

    def route(self, after: int, inside: ProgressWindow | None, state: PipelineState, context: RunContext) -> str:
        """Where the run goes when step `after` ends (or `inside`'s close node when after is the window's last)."""
        if context.is_cancelled():
            return close_name(inside) if inside is not None else END
        error = state.get("error")
        if error is not None:
            if inside is not None:
                return close_name(inside)
            return FALLBACK if error.kind == ErrorKind.SEARCH_NOTHING else END
        for index in range(after + 1, len(self.placed)):
            placed = self.placed[index]
            if not placed.runs(state):
                continue
            if inside is not None and placed.window != inside:
                return close_name(inside)
            return self.entry_of(index, inside)
        return close_name(inside) if inside is not None else END
