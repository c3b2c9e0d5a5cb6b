package parallel

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// fenceSetup is two holders of one task's claims, each in a worktree of
// its own: in one repository, or (remote) on two machines' clones of one
// remote. before sets the hook that runs right before holder 1's move of
// the integration branch (its store check passed).
type fenceSetup struct {
	remote       *fakeGit // the repository where the branch lives
	ws1, ws2     *workspace
	g1, g2       *fakeGit
	store        loop.LandingStore
	stale, fresh loop.Task
}

func newFenceSetup(t *testing.T, onRemote bool) *fenceSetup {
	t.Helper()
	ctx := t.Context()
	s := &fenceSetup{store: looptest.NewMemStore(nil),
		stale: loop.Task{ID: "a", Title: "A", Generation: 1}, fresh: loop.Task{ID: "a", Title: "A", Generation: 2}}
	origin := newFakeGit(map[string]string{"README": "r"})
	origin.refs[into] = origin.head
	name := ""
	s.remote, s.g1, s.g2 = origin, origin, origin
	if onRemote {
		name = "origin"
		s.g1, s.g2 = origin.clone(), origin.clone()
		for _, g := range []*fakeGit{s.g1, s.g2} {
			if _, _, err := g.Fetch(ctx, "origin", into); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.ws1, s.ws2 = testWorkspace(s.g1, s.store, "/w1", name), testWorkspace(s.g2, s.store, "/w2", name)
	s.ws2.worker = "w2"
	for _, w := range []*workspace{s.ws1, s.ws2} {
		if err := w.git.AddWorktree(ctx, w.dir, origin.head); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// before runs f once, right before holder 1 moves the integration branch.
func (s *fenceSetup) before(f func()) {
	once := false
	run := func(ref string) {
		if ref == into && !once {
			once = true
			f()
		}
	}
	s.g1.beforeSwap = run
	s.g1.beforePush = func(p PushParams) { run(p.Ref) }
}

// claim is a Current check that passes while *held.
func claim(held *bool) func(context.Context) error {
	return func(context.Context) error {
		if !*held {
			return fmt.Errorf("%w: task a is held by another claim", loop.ErrStaleClaim)
		}
		return nil
	}
}

// TestFenceRefusesStaleHolder: holder 1's claim check passes, then it
// stops; the task is taken over (holder 2's attempt begins) before its
// move of the branch goes ahead. The fence refuses that move, holder 1
// gives up (ErrStaleClaim), and holder 2's work is what lands — once.
func TestFenceRefusesStaleHolder(t *testing.T) {
	for _, onRemote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote=%v", onRemote), func(t *testing.T) {
			ctx := t.Context()
			s := newFenceSetup(t, onRemote)
			if _, err := s.ws1.Begin(ctx, s.stale, 0); err != nil {
				t.Fatal(err)
			}
			s.g1.write("/w1", "a.txt", "by the stale holder")
			held := true
			s.before(func() {
				held = false
				if _, err := s.ws2.Begin(ctx, s.fresh, 0); err != nil {
					t.Error(err)
				}
			})
			_, err := s.ws1.Integrate(ctx, loop.IntegrateRequest{Task: s.stale, Current: claim(&held)})
			if !errors.Is(err, loop.ErrStaleClaim) {
				t.Fatalf("the stale holder's Integrate = %v; want ErrStaleClaim", err)
			}
			if tip := s.remote.refs[into]; tip != s.remote.head {
				t.Fatalf("the stale holder's move went through: the branch is at %s", tip)
			}
			s.g2.write("/w2", "a.txt", "by the current claim")
			got, err := s.ws2.Integrate(ctx, loop.IntegrateRequest{Task: s.fresh})
			if err != nil || got.Commit == "" || got.Elsewhere {
				t.Fatalf("the current claim's Integrate = %+v, %v; want its landing", got, err)
			}
			if files := s.remote.filesAt(into); files["a.txt"] != "by the current claim" {
				t.Errorf("the branch holds %v; want the current claim's work", files)
			}
			if got := landedOrder(s.remote); len(got) != 1 {
				t.Errorf("landed %v; want task a once", got)
			}
			if f := s.remote.refs[fenceRef(into, "a")]; f != s.remote.refs[into] {
				t.Errorf("the fence is at %s; want the landing, %s", f, s.remote.refs[into])
			}
		})
	}
}

// TestFenceTakenBack: a stale holder whose attempt began after the
// current claim's (it stopped between its claim and its Begin) replaced
// the fence; the current claim, asked again, puts its mark back and
// lands, and the stale holder, later, finds that landing and lands
// nothing.
func TestFenceTakenBack(t *testing.T) {
	for _, onRemote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote=%v", onRemote), func(t *testing.T) {
			ctx := t.Context()
			s := newFenceSetup(t, onRemote)
			// ws2 is the current claim here, ws1 the stale one.
			if _, err := s.ws2.Begin(ctx, s.fresh, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ws1.Begin(ctx, s.stale, 0); err != nil {
				t.Fatal(err)
			}
			s.g2.write("/w2", "a.txt", "by the current claim")
			checks := 0
			current := func(context.Context) error { checks++; return nil }
			got, err := s.ws2.Integrate(ctx, loop.IntegrateRequest{Task: s.fresh, Current: current})
			if err != nil || got.Commit == "" {
				t.Fatalf("the current claim's Integrate = %+v, %v; want its landing", got, err)
			}
			if checks < 2 {
				t.Errorf("%d claim checks; want the one before the move and one after the fence refused it", checks)
			}
			// The stale holder finds the task landed by the current
			// claim: nothing of its own lands (its store move will be
			// refused as stale).
			s.g1.write("/w1", "a.txt", "by the stale holder")
			held := false
			if got, err := s.ws1.Integrate(ctx, loop.IntegrateRequest{Task: s.stale, Current: claim(&held)}); err != nil || !got.Elsewhere {
				t.Fatalf("the stale holder's Integrate = %+v, %v; want Elsewhere", got, err)
			}
			if files := s.remote.filesAt(into); files["a.txt"] != "by the current claim" {
				t.Errorf("the branch holds %v; want the current claim's work", files)
			}
			if got := landedOrder(s.remote); len(got) != 1 {
				t.Errorf("landed %v; want task a once", got)
			}
		})
	}
}

// TestLandedFromAnotherClaimIsDone: the task's landing by an older claim
// is on the branch when the current claim's work is ready to land (a
// landing ralph recorded, made before the current claim's fence went
// up): the current claim's Integrate says so (Elsewhere), lands nothing
// and never calls its own claim stale.
func TestLandedFromAnotherClaimIsDone(t *testing.T) {
	ctx := t.Context()
	s := newFenceSetup(t, false)
	if _, err := s.ws2.Begin(ctx, s.fresh, 0); err != nil {
		t.Fatal(err)
	}
	s.remote.mu.Lock()
	landed := landLocked(t, s.remote, s.store, "a", map[string]string{"README": "r", "a.txt": "by claim 1"}, true)
	s.remote.mu.Unlock()
	s.g2.write("/w2", "a.txt", "by claim 2")
	got, err := s.ws2.Integrate(ctx, loop.IntegrateRequest{Task: s.fresh})
	if err != nil || !got.Elsewhere || got.Commit != "" {
		t.Fatalf("Integrate = %+v, %v; want Elsewhere, nothing landed", got, err)
	}
	if tip := s.remote.refs[into]; tip != landed {
		t.Errorf("the branch moved to %s; want it left at claim 1's landing", tip)
	}
	// The attempt's work is kept when the tree is next used.
	if _, err := s.ws2.Begin(ctx, loop.Task{ID: "b", Generation: 1}, 0); err != nil {
		t.Fatal(err)
	}
	if kept := s.remote.refs[heads+AttemptBranchPrefix+"a/1"]; s.remote.commits[kept].files["a.txt"] != "by claim 2" {
		t.Errorf("claim 2's work is not kept on ralph/attempt/a/1 (%q)", kept)
	}
}

// TestFenceKeptMoving: something moves the task's fence before every move
// of the branch (an agent's process left behind): the current claim puts
// it back maxRetakes times, then gives the attempt up as task trouble,
// its work kept — never a loop without end.
func TestFenceKeptMoving(t *testing.T) {
	ctx := t.Context()
	s := newFenceSetup(t, false)
	if _, err := s.ws1.Begin(ctx, s.fresh, 0); err != nil {
		t.Fatal(err)
	}
	s.g1.write("/w1", "a.txt", "work")
	moves := 0
	s.g1.beforeSwap = func(ref string) {
		if ref == into {
			moves++
			s.g1.SetRef(ctx, fenceRef(into, "a"), s.g1.head)
		}
	}
	_, err := s.ws1.Integrate(ctx, loop.IntegrateRequest{Task: s.fresh})
	var ie *loop.IntegrationError
	if !errors.As(err, &ie) || ie.Attempt == "" {
		t.Fatalf("Integrate = %v; want task trouble with the attempt kept", err)
	}
	if moves != maxRetakes+1 {
		t.Errorf("%d tries to move the branch; want %d", moves, maxRetakes+1)
	}
	if tip := s.remote.refs[into]; tip != s.remote.head {
		t.Errorf("the branch moved to %s", tip)
	}
}
