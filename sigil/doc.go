// Package sigil parses the control tags ("sigils") of ralph's agent
// protocol (ARCHITECTURE.md §4) from a piece of agent text: the agent's
// final answer, never its tool output. It imports only the standard
// library.
//
// # Sigils
//
//	<task-done>ID</task-done>          Result.Done (first-seen order, deduplicated)
//	<task-failed>ID</task-failed>      Result.Failed (minus ids also done: done wins)
//	<promise>COMPLETE</promise>        Result.Complete
//	<promise>FAILURE</promise>         Result.Failure
//	<next-model>MODEL</next-model>     Result.NextModel, MODEL one of Models(); the last valid one wins
//	<verify-pass/>                     Result.VerifyPass; also <verify-pass /> and <verify-pass></verify-pass>
//	<verify-fail>REASON</verify-fail>  Result.VerifyFail and VerifyReason (of the last one)
//	RALPH_DONE alone on a line         RalphDone (for a progress file's Status section)
//
// # Standalone, not quoted
//
// A tag counts anywhere in ordinary prose, even mid-sentence, but not when
// it is quoted as code, as agents do when they talk about the protocol:
//
//   - inside a fenced code block: a line of three or more backticks or
//     tildes opens it (a backtick fence's info string may not contain a
//     backtick, as in CommonMark), a line of the same character at least as
//     long and nothing else closes it, and an unclosed fence quotes the rest
//     of the text. The fence lines themselves (info string included) are
//     quoted;
//   - inside inline code: a backtick run opens a span that the next run of
//     exactly the same length closes; a run with no such closer is literal.
//     Spans may cross lines but not a blank line or a fence, as in CommonMark
//     paragraphs. A backslash before a run escapes its first backtick for
//     opening.
//
// Both the opening tag and the closing tag must be standalone; a tag whose
// closer lies in code is not a sigil.
//
// Simplifications of CommonMark, chosen because agent text is not a
// document and a simple rule is easier to predict: a fence is recognised at
// any indentation and after block quote markers ('>') and one list item
// marker ("- ", "1. "), so a fence nested in a list or a quote is still code
// (a deeply indented fence line is code either way), and it stays open until
// its closing fence even past the end of that list or quote; indented code
// blocks and HTML comments are not recognised (an indented tag is prose:
// nested list items are indented too); a tag in a block quote is prose;
// only blank lines and fences end a paragraph for inline code.
//
// # Form of a tag
//
//   - Names are lowercase, exactly as ARCHITECTURE.md §4 writes them;
//     <TASK-DONE> is not a sigil. The values are exact too: COMPLETE and
//     FAILURE upper case, model names lower case. The prompts teach the exact
//     spelling, and a near miss costs a retry, while a lenient reading of
//     prose could end a run.
//   - Whitespace is tolerated around a body (spaces, tabs, line breaks: a
//     tag may be split over lines) and before the closing '>' of either tag
//     (<task-done >, </task-done\n>), but not after '<'. Tags take no
//     attributes.
//   - A short body (task id, promise, model, verify-pass) runs to the next
//     '<', which must be the matching closer; so it never contains '<'. An
//     id is the trimmed body; an empty one, or one containing a control
//     character (a line break, a tab), is ignored. Self-closed <task-done/>
//     and the like carry no id and are ignored.
//   - A verify-fail reason is free text: it may contain '<', line breaks,
//     inline code and fenced blocks, and runs to the first standalone
//     </verify-fail>. Tags inside a reason belong to it and are not sigils.
//     <verify-fail/> and an empty reason still count as a fail. An unclosed
//     <verify-fail> is not a sigil.
//
// # Conflicts
//
//   - Done and failed for the same id: done wins (ARCHITECTURE.md §4).
//   - Pass and fail in one text: fail wins, so VerifyPass is false. A
//     verifier that says fail anywhere has doubts. For the same reason a
//     pass must be unambiguous (only the three forms above, with nothing but
//     whitespace inside), while any closed verify-fail is a fail.
//   - COMPLETE and FAILURE in one text: both are reported; the loop decides
//     (it believes COMPLETE only when the store agrees).
//   - RalphDone, like Parse, ignores lines inside fenced code blocks.
//
// # Cost
//
// Parse and RalphDone run in time linear in the text, without regular
// expressions, and are safe for concurrent use. A text with no '<' returns
// at once. BenchmarkParse measures a realistic 1 MB answer; the adversarial
// benchmarks hold unmatched backtick runs of growing length, unclosed tags
// and quoted closers.
package sigil
