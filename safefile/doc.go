// Package safefile opens, creates, appends to, reads, lists, makes and
// atomically replaces files below a trusted directory without following
// any link an agent could have planted on the way
// (ARCHITECTURE.md §7.2). It imports only the standard
// library, so that loop may use it.
//
// # The trusted directory
//
// Every call names a base: a directory the user gave (the project root,
// a --dir, a log directory outside the project) or one ralph made and
// the agent cannot write. The base itself is opened as it is named, its
// own links followed: the user named it. Everything below it is reached
// one component at a time, from the base's descriptor (os.Root), and a
// component that is a symbolic link is refused — even one whose target
// stays inside the base: os.Root alone would follow a link from
// .ralph/logs/s/iter-3.ndjson to ../../progress.db, and so would hand the
// plan to whoever writes the raw stream. A name may be relative to the
// base or absolute below it; ".." and a name outside the base are errors.
//
// # The rules
//
//   - Directories: each component is lstat'ed (a link is refused, a
//     non-directory is an error), opened, and its descriptor fstat'ed: it
//     must be the directory the lstat saw, or something swapped a link in
//     between and the open is refused. Missing directories are made
//     (MkdirAll, Mkdir) with mkdirat, which never follows a link.
//   - Reading (Open, ReadFile): the file must be a regular file (or a
//     character device such as /dev/null, which no unprivileged agent can
//     make, nor hard-link in from /dev) that is not a link, and the descriptor opened must be the file lstat saw. A file
//     with several hard links may be read: making one needs access to the
//     target from where the agent stands, so it shows the agent nothing it
//     could not read itself.
//   - New files (Create, and the temporary file of WriteFile) are created
//     with O_CREAT|O_EXCL, which fails on any existing name, a dangling
//     link included: a new file is always a new inode of ralph's.
//   - Appending (Append) to an existing file: a regular file (or a
//     character device, as for reading), not a link,
//     with exactly one name (a hard link planted there would make ralph
//     append to the file it shares an inode with), and the descriptor
//     opened is checked against the lstat. Nothing is truncated through
//     this package: O_TRUNC happens at open(2), before any check could run.
//   - Replacing (WriteFile): the new content goes to a new temporary file
//     beside the old one, which is fsynced and renamed over the name;
//     rename(2) replaces a link at the name and never writes through it.
//   - Acting on a name itself (Dir's Remove, RemoveAll, Rename, Lstat,
//     Readlink, Symlink, Chmod, Chtimes; what a guard needs to put a
//     directory back as it was): the directories on the way are checked
//     as above, and a link at the name is what is removed, renamed or
//     read, never what it names; RemoveAll follows none below it either;
//     Chmod and Chtimes refuse a link at the name. Symlink makes a link
//     to any target: one ralph makes is one it means.
//   - Every open adds O_NONBLOCK (no effect on a regular file) so that a
//     FIFO swapped in cannot hang ralph in open(2); it is refused by the
//     checks that follow.
//
// # Errors
//
// A refused link is a *LinkError naming the full path and saying why
// (errors.Is(err, ErrLink)); other errors are *fs.PathError values with
// the full path, so errors.Is(err, fs.ErrNotExist) and fs.ErrExist work
// as with package os. What a caller does with a refusal is its decision:
// ralph's own (a raw stream written without its log, a run that stops on
// a refused prompt override) are in the documentation of the packages
// that call this one (agentproc, loop, serve, parallel, dag/progress).
//
// # Limits
//
// A base that is itself a link is followed (the user named it). A link in
// a directory component, swapped in after it was opened, is not in the
// path any more: the descriptor is what ralph uses. Bind mounts, /proc
// and device files are not prevented (as with os.Root); none can be made
// by an unprivileged agent. Hard links are detected only where the
// platform reports a link count (every Unix); elsewhere that check is
// skipped.
package safefile
