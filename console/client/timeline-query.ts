/** The timeline the page shows: the pushed newest rows, or while a filter is set the rows asked for with
 * it, paged back by `older`. */
import { computed, reactive, ref, watch, type ComputedRef } from "vue";
import type { ConsoleView } from "../../server/console/index.ts";
import type { TimelineItem } from "../../server/console/decisions.ts";
import { call } from "./call.ts";

const PAGE = 50;

export function useTimelineQuery(view: ComputedRef<ConsoleView | undefined>, refused: (answer: { error: string }) => void) {
  const filter = reactive({ session_id: "", kind: "", since: "" });
  const queried = ref<TimelineItem[]>();
  const nextBefore = ref<number | null>(null);
  const filtered = computed(() => Boolean(filter.session_id || filter.kind || filter.since));
  const timeline = computed(() => (filtered.value ? (queried.value ?? []) : (view.value?.timeline ?? [])));

  /** Asks for the rows before `before` (the newest without it): they replace the list, or extend it. */
  async function load(before?: number) {
    const query = {
      ...(filter.session_id ? { session_id: filter.session_id } : {}),
      ...(filter.kind ? { kind: filter.kind } : {}),
      ...(filter.since ? { since: new Date(filter.since).toISOString() } : {}),
      ...(before ? { before } : {}),
      limit: PAGE,
    };
    const answer = await call<{ entries: TimelineItem[]; next_before: number | null }>("anon-notify/timeline", query);
    if (!answer.ok) return before ? undefined : refused(answer);
    queried.value = [...(before ? (queried.value ?? []) : []), ...answer.value.entries];
    nextBefore.value = answer.value.next_before;
  }

  async function reload() {
    if (filtered.value) await load();
    else nextBefore.value = null;
  }

  async function older() {
    const before = nextBefore.value ?? timeline.value.at(-1)?.id;
    if (!before) return;
    if (!filtered.value) queried.value = [...(view.value?.timeline ?? [])];
    await load(before);
  }

  watch(
    () => [filter.session_id, filter.kind, filter.since],
    () => void reload(),
  );
  // New rows arrive with the pushed data; a filtered list is asked again.
  watch(
    () => view.value?.timeline[0]?.id,
    () => void reload(),
  );
  watch(view, (current) => {
    if (current && !filtered.value && nextBefore.value === null && current.timeline.length >= PAGE) nextBefore.value = current.timeline.at(-1)!.id;
  });

  return { filter, timeline, nextBefore, older };
}
