/** A mute's end as the page writes it: the time of day, with the date when it is not the day of `now` (the page's clock). */
export function untilText(iso: string, now: number): string {
  const at = new Date(iso);
  const today = at.toDateString() === new Date(now).toDateString();
  const time = { hour: "2-digit", minute: "2-digit", hourCycle: "h23" } as const;
  return at.toLocaleString(undefined, today ? time : { month: "2-digit", day: "2-digit", ...time });
}
