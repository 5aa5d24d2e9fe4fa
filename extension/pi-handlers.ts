/**
 * A group of Pi handlers attached and detached as one, for handlers that only matter in some states
 * (an active session, a running service). `pi.on` returns the handler's own remover; Pi copies the
 * handler list at each emission, so attaching or detaching inside a handler is safe.
 */
export interface Attachable {
  set(on: boolean): void;
  readonly attached: boolean;
}

export function attachable(register: () => (() => void)[]): Attachable {
  let offs: (() => void)[] | undefined;
  return {
    set(on) {
      if (on && !offs) offs = register();
      else if (!on && offs) {
        for (const off of offs) off();
        offs = undefined;
      }
    },
    get attached() {
      return offs !== undefined;
    },
  };
}
