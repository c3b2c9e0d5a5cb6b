package agentproc

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The test binary doubles as a helper process (os/exec's own pattern):
// with RALPH_AGENTPROC_FAKE set, TestMain plays that part instead of
// running tests.
const fakeEnv = "RALPH_AGENTPROC_FAKE"

// fakeModes are the parts the test binary plays, added by the test files
// (some build only on Linux).
var fakeModes = map[string]func() int{}

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		play, ok := fakeModes[mode]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown fake mode %q\n", mode)
			os.Exit(2)
		}
		os.Exit(play())
	}
	os.Exit(m.Run())
}

// processGone reports whether pid has exited (gone, or a zombie waiting to
// be reaped).
func processGone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
