/** A generated sample of what people and agents type, for the chat's text to be tested on. */
import fc from "fast-check";

/** Text people and agents write, rich in what markup parsers and CQ codes take for their own. */
export const markupText = fc
  .array(
    fc.oneof(
      fc.constantFrom("<", ">", "&", '"', "'", "/", "=", "[", "]", ",", "`", ";", "#", "$", "{", "}", "(", ")", "\\", "-", "--"),
      fc.constantFrom(
        "<Header>",
        "</b>",
        '<at type="all"/>',
        '<img src="http://127.0.0.1:9/x.png"/>',
        "&lt;",
        "&amp;",
        "&#91;",
        "[CQ:at,qq=all]",
        "[CQ:reply,id=1]",
        '<quote id="1"/>',
        "$(date)",
        "$(anon.status)",
      ),
      fc.constantFrom("a", "fix", "组件", "测试", "0", "x_y"),
      fc.constantFrom(" ", "  "),
    ),
    { minLength: 1, maxLength: 12 },
  )
  .map((parts) => parts.join("").trim())
  .filter((s) => s.length > 0);
