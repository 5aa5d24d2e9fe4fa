/** Why a run failed, in the page's words: a failure code the page knows is worded, another stays the code it is. Pure. */
export function failureText(code: string, t: (key: string) => string, te: (key: string) => boolean): string {
  return te(`failure.${code}`) ? t(`failure.${code}`) : code;
}
