/** Pi handlers and model tools that only matter in some states, switched on and off as the state changes. */
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

/** A group of Pi handlers attached and detached as one. `pi.on` returns the handler's own remover;
 * Pi copies the handler list at each emission, so attaching or detaching inside a handler is safe. */
export interface Attachable {
  set(on: boolean): void;
  readonly attached: boolean;
}

/** A model tool offered only while a session wants it. Pi cannot unregister a tool, so it is
 * registered the first time it is offered (which also activates it) and afterwards switched in and
 * out of Pi's active tools. Its words follow the session's language: offered in another language
 * than it was registered in, it is registered again (Pi replaces a tool of the same name). */
export interface OfferedTool {
  offer(language: string): void;
  withdraw(): void;
}

export function offeredTool(pi: Pick<ExtensionAPI, "getActiveTools" | "setActiveTools">, name: string, register: () => void): OfferedTool {
  let registeredIn: string | undefined;
  const setActive = (active: boolean) => {
    const others = pi.getActiveTools().filter((tool) => tool !== name);
    pi.setActiveTools(active ? [...others, name] : others);
  };
  return {
    offer(language) {
      if (registeredIn === language) return setActive(true);
      const first = registeredIn === undefined;
      registeredIn = language;
      register();
      // Registering again keeps the tool's active state; it is offered now.
      if (!first) setActive(true);
    },
    withdraw() {
      if (registeredIn !== undefined) setActive(false);
    },
  };
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
