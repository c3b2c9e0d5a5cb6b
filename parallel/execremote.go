package parallel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The remote's side of ExecGit (Config.Remote). Fetches and pushes of
// one ExecGit take turns; every one names what it fetches or pushes
// (no configured refspec, no tags, no submodules), so that the user's
// configuration never makes it touch other refs.

// CheckRemote reports ErrNoRemote unless `git remote` lists remote.
func (g *ExecGit) CheckRemote(ctx context.Context, remote string) error {
	if err := checkName("remote", remote); err != nil {
		return err
	}
	out, err := g.run(ctx, g.Root, nil, "remote")
	if err != nil {
		return err
	}
	names := strings.Fields(out)
	if !slices.Contains(names, remote) {
		has := "it has none"
		if len(names) > 0 {
			has = "it has " + strings.Join(names, ", ")
		}
		return fmt.Errorf("%w %q in the repository (%s; git remote add %s URL makes one)", ErrNoRemote, remote, has, remote)
	}
	return nil
}

// RemoteURL is the URL remote pushes to (git remote get-url --push).
func (g *ExecGit) RemoteURL(ctx context.Context, remote string) (string, error) {
	if err := g.CheckRemote(ctx, remote); err != nil {
		return "", err
	}
	out, err := g.run(ctx, g.Root, nil, "remote", "get-url", "--push", remote)
	return strings.TrimSpace(out), err
}

// trackingRef is where Fetch keeps branch ref of remote:
// refs/remotes/<remote>/<branch>.
func trackingRef(remote, ref string) string {
	return "refs/remotes/" + remote + "/" + strings.TrimPrefix(ref, heads)
}

// fetchTries bounds Fetch's tries when another git process holds the
// remote-tracking ref's lock.
const fetchTries = 5

// Fetch runs git fetch for the one branch, forced into its
// remote-tracking ref (--refmap= keeps the remote's configured refspecs
// out of it), and returns the commit fetched. "couldn't find remote ref"
// is ok false. A fetch that failed because another git process (a
// second build in this clone) held the tracking ref's lock is tried
// again.
func (g *ExecGit) Fetch(ctx context.Context, remote, ref string) (string, bool, error) {
	if err := checkNames(remote, ref); err != nil {
		return "", false, err
	}
	if b, ok := strings.CutPrefix(ref, heads); !ok || b == "" {
		return "", false, fmt.Errorf("parallel: fetch %q: not a branch (refs/heads/…)", ref)
	}
	track := trackingRef(remote, ref)
	g.remote.Lock()
	defer g.remote.Unlock()
	for attempt := 1; ; attempt++ {
		_, err := g.run(ctx, g.Root, nil, "fetch", "--quiet", "--no-tags", "--recurse-submodules=no", "--refmap=",
			"--", remote, "+"+ref+":"+track)
		if err == nil {
			break
		}
		var ge *gitError
		if !errors.As(err, &ge) || ctx.Err() != nil {
			return "", false, err
		}
		if strings.Contains(ge.tail, "couldn't find remote ref") {
			return "", false, nil
		}
		if attempt == fetchTries || !lockBusy(ge.tail) {
			return "", false, err
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
	commit, ok, err := g.resolve(ctx, g.Root, track)
	if err == nil && !ok {
		err = fmt.Errorf("parallel: fetched %s of %s, but %s names no commit", ref, remote, track)
	}
	return commit, ok, err
}

// lockBusy reports whether git's message says another process held a
// lock ("Unable to create '….lock': File exists", "cannot lock ref").
func lockBusy(msg string) bool {
	return strings.Contains(msg, ".lock': File exists") || strings.Contains(msg, "cannot lock ref")
}

// RemoteRefs runs git ls-remote with prefix and a glob, keeping only the
// refs prefix names (a glob's * also crosses '/').
func (g *ExecGit) RemoteRefs(ctx context.Context, remote, prefix string) (map[string]string, error) {
	if err := checkNames(remote, prefix); err != nil {
		return nil, err
	}
	pattern := prefix
	if strings.HasSuffix(prefix, "/") {
		pattern += "*"
	}
	out, err := g.run(ctx, g.Root, nil, "ls-remote", "--refs", "--", remote, pattern)
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for line := range strings.Lines(out) {
		commit, ref, ok := strings.Cut(strings.TrimRight(line, "\n"), "\t")
		if ok && strings.HasPrefix(ref, prefix) {
			refs[ref] = commit
		}
	}
	return refs, nil
}

// Push runs git push --porcelain for the one ref (and p.Guard's, in
// one --atomic push) and reads the refs' status lines: "!" with
// "[rejected] (non-fast-forward)" or "(fetch first)" is a fast-forward
// the remote's ref has outrun (ErrRefMoved), "(stale info)" a lease the
// remote's ref no longer matches (ErrRefExists for PushCreate, else
// ErrRefMoved). "[remote rejected]" is what the remote says when its ref
// moved between the push's look and its update ("failed to update ref"),
// and also what its hooks say: the refs are read again (git ls-remote)
// to tell them apart.
//
// No pre-push hook runs (--no-verify: ralph's own gates decide, as for
// Commit), no tags follow, no submodule is pushed and nothing is signed,
// whatever the configuration says.
func (g *ExecGit) Push(ctx context.Context, p PushParams) error {
	if p.Mode == "" {
		p.Mode = PushFastForward
	}
	args, err := pushArgs(p)
	if err != nil {
		return err
	}
	g.remote.Lock()
	out, err := g.run(ctx, g.Root, nil, args...)
	g.remote.Unlock()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	flag, summary, ok := pushStatus(out, p.Ref)
	if p.Guard != nil {
		// An atomic push names the ref that refused first; the other
		// says only "(atomic push failed)".
		if gflag, gsummary, gok := pushStatus(out, p.Guard.Ref); gok && gflag == '!' && !strings.Contains(gsummary, "atomic push failed") {
			flag, summary, ok = gflag, gsummary, true
			if strings.Contains(summary, "(stale info)") {
				return fmt.Errorf("%w: %s on %s is no longer at %s: %s", ErrRefMoved, p.Guard.Ref, p.Remote, p.Guard.Old, summary)
			}
		}
	}
	if !ok || flag != '!' {
		return err
	}
	switch {
	case p.Mode == PushFastForward && (strings.Contains(summary, "(non-fast-forward)") || strings.Contains(summary, "(fetch first)")):
		return fmt.Errorf("%w: %s on %s is no longer at %s: %s", ErrRefMoved, p.Ref, p.Remote, orNone(p.Old), summary)
	case p.Mode == PushCreate && strings.Contains(summary, "(stale info)"):
		return fmt.Errorf("%w: %s on %s", ErrRefExists, p.Ref, p.Remote)
	case p.Mode == PushReplace && strings.Contains(summary, "(stale info)"):
		return fmt.Errorf("%w: %s on %s is no longer at %s: %s", ErrRefMoved, p.Ref, p.Remote, orNone(p.Old), summary)
	case strings.Contains(summary, "[remote rejected]"):
		return g.rejected(ctx, p, err, summary)
	}
	return err
}

// pushArgs checks p and returns git's arguments for it.
func pushArgs(p PushParams) ([]string, error) {
	if err := checkNames(p.Remote, p.Ref, p.Commit); err != nil {
		return nil, err
	}
	if err := pushable(p.Ref, p.Mode); err != nil {
		return nil, err
	}
	if p.Old != "" {
		if err := checkName("old", p.Old); err != nil {
			return nil, err
		}
	}
	args := []string{"-c", "push.gpgSign=false", "push", "--porcelain", "--no-verify", "--no-follow-tags", "--recurse-submodules=no"}
	spec := p.Commit + ":" + p.Ref
	switch p.Mode {
	case PushFastForward:
	case PushCreate:
		args = append(args, "--force-with-lease="+p.Ref+":")
	case PushReplace:
		if p.Old != "" {
			args = append(args, "--force-with-lease="+p.Ref+":"+p.Old)
		} else {
			spec = "+" + spec
		}
	default:
		return nil, fmt.Errorf("parallel: push mode %q: want one of %v", p.Mode, PushModes())
	}
	specs := []string{spec}
	if m := p.Guard; m != nil {
		if err := checkNames(m.Ref, m.New, m.Old); err != nil {
			return nil, err
		}
		if err := pushable(m.Ref, PushReplace); err != nil {
			return nil, err
		}
		args = append(args, "--atomic", "--force-with-lease="+m.Ref+":"+m.Old)
		specs = append(specs, m.New+":"+m.Ref)
	}
	return append(append(args, "--", p.Remote), specs...), nil
}

// pushable refuses a push to ref in mode unless ref is a branch, or one
// of ralph's own refs (refs/ralph/…) made or replaced.
func pushable(ref string, mode PushMode) error {
	if b, ok := strings.CutPrefix(ref, heads); ok && b != "" {
		return nil
	}
	if b, ok := strings.CutPrefix(ref, ownRefs); ok && b != "" && (mode == PushReplace || mode == PushCreate) {
		return nil
	}
	return fmt.Errorf("parallel: push to %q: not a branch (refs/heads/…), nor a ref of ralph's own (refs/ralph/…) made or replaced", ref)
}

// rejected tells a push the remote refused because its refs moved under
// it (ErrRefMoved, ErrRefExists) from one its hooks refused (err): the
// refs are read again. A remote already where the push would have put
// it is success (another push of the same made it).
func (g *ExecGit) rejected(ctx context.Context, p PushParams, err error, summary string) error {
	refs, rerr := g.RemoteRefs(ctx, p.Remote, p.Ref)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	now, there := refs[p.Ref]
	guardMoved, guardDone := false, true
	if m := p.Guard; m != nil {
		grefs, rerr := g.RemoteRefs(ctx, p.Remote, m.Ref)
		if rerr != nil {
			return errors.Join(err, rerr)
		}
		gnow := grefs[m.Ref]
		guardMoved, guardDone = gnow != m.Old && gnow != m.New, gnow == m.New
	}
	switch {
	case guardMoved:
		return fmt.Errorf("%w: %s on %s moved while the push was under way (%s)", ErrRefMoved, p.Guard.Ref, p.Remote, summary)
	case there && now == p.Commit && guardDone:
		return nil
	case p.Mode == PushCreate && there && now != p.Commit:
		return fmt.Errorf("%w: %s on %s (%s)", ErrRefExists, p.Ref, p.Remote, summary)
	case p.Mode != PushCreate && there && now != p.Old && now != p.Commit:
		return fmt.Errorf("%w: %s on %s moved to %s while the push was under way (%s)", ErrRefMoved, p.Ref, p.Remote, now, summary)
	}
	return err
}

// pushStatus finds ref's line in git push --porcelain's output:
// "<flag>\t<from>:<to>\t<summary>".
func pushStatus(out, ref string) (flag byte, summary string, ok bool) {
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 3 || len(f[0]) != 1 {
			continue
		}
		if _, to, _ := strings.Cut(f[1], ":"); to == ref {
			return f[0][0], f[2], true
		}
	}
	return 0, "", false
}

func orNone(commit string) string {
	if commit == "" {
		return "nothing"
	}
	return commit
}
