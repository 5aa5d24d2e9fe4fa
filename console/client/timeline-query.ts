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

  function query(before?: number) {
    return {
      ...(filter.session_id ? { session_id: filter.session_id } : {}),
      ...(filter.kind ? { kind: filter.kind } : {}),
      ...(filter.since ? { since: new Date(filter.since).toISOString() } : {}),
      ...(before ? { before } : {}),
      limit: PAGE,
    };
  }

  async function reload() {
    if (!filtered.value) {
      nextBefore.value = null;
      return;
    }
    const answer = await call<{ entries: TimelineItem[]; next_before: number | null }>("anon-notify/timeline", query());
    if (answer.ok) {
      queried.value = answer.value.entries;
      nextBefore.value = answer.value.next_before;
    } else refused(answer);
  }

  async function older() {
    const before = nextBefore.value ?? timeline.value.at(-1)?.id;
    if (!before) return;
    if (!filtered.value) queried.value = [...(view.value?.timeline ?? [])];
    const answer = await call<{ entries: TimelineItem[]; next_before: number | null }>("anon-notify/timeline", query(before));
    if (!answer.ok) return;
    queried.value = [...(queried.value ?? []), ...answer.value.entries];
    nextBefore.value = answer.value.next_before;
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
