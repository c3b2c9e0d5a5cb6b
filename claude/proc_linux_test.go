package claude

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// The parent-death signal is tied to the thread that forked the agent, and
// the Go runtime ends a thread when a goroutine locked to it returns: many
// such goroutines while the agent runs must not take the agent down.
func TestAgentOutlivesLockedThreads(t *testing.T) {
	req := fakeRequest(t, "drip")
	var once sync.Once
	req.OnEvent = func(ev loop.Event) {
		once.Do(func() {
			go func() {
				for range 200 {
					done := make(chan struct{})
					go func() {
						defer close(done)
						runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
					}()
					<-done
					time.Sleep(time.Millisecond)
				}
			}()
		})
	}
	res, err := testRunner(t).Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != loop.ClassSuccess {
		t.Errorf("class %s (exit %d): the agent died with a thread of ralph's", res.Class, res.ExitCode)
	}
}
