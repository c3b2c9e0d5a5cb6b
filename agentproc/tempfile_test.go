package agentproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/loop"
)

// A TempFile's name says who wrote it, and nothing else is taken for such
// a name; the names of earlier releases' system prompt files still parse.
func TestTempFileName(t *testing.T) {
	writer := loop.Holder{Host: "boot.4026531836", PID: 4242, Start: 987654}
	f, err := os.CreateTemp(t.TempDir(), tempPattern("system-prompt", ".md", writer))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	type parsed struct {
		PID   int
		Start int64
		Tag   string
		OK    bool
	}
	tag := hostTag(writer.Host)
	tests := []struct {
		name string
		file string
		want parsed
	}{
		{name: "made by TempFile", file: filepath.Base(f.Name()), want: parsed{4242, 987654, tag, true}},
		{name: "an earlier release's system prompt file", file: "ralph-system-prompt-1-2-0000abcd-7.md", want: parsed{1, 2, "0000abcd", true}},
		{name: "another kind and suffix", file: "ralph-config-1-2-0000abcd-7.json", want: parsed{1, 2, "0000abcd", true}},
		{name: "no suffix", file: "ralph-x-1-2-0000abcd-7", want: parsed{1, 2, "0000abcd", true}},
		{name: "an older release's name, no writer", file: "ralph-system-prompt-123456.md"},
		{name: "not a number", file: "ralph-system-prompt-x-1-0000abcd-7.md"},
		{name: "no kind", file: "ralph-1-2-0000abcd-7.md"},
		{name: "a field too many", file: "ralph-system-prompt-1-1-0000abcd-7-8.md"},
		{name: "not a host tag", file: "ralph-system-prompt-1-1-0000abcz-7.md"},
		{name: "a suffix without a dot", file: "ralph-system-prompt-1-1-0000abcd-7md"},
		{name: "another prefix", file: "other-system-prompt-1-1-0000abcd-7.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got parsed
			got.PID, got.Start, got.Tag, got.OK = tempWriter(tt.file)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tempWriter(%q) (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

func TestTempFile(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	path, remove, err := TempFile("system-prompt", ".md", "the prompt")
	if err != nil {
		t.Fatal(err)
	}
	me := loop.ThisProcess()
	pid, start, tag, ok := tempWriter(filepath.Base(path))
	if diff := cmp.Diff([]any{me.PID, me.Start, hostTag(me.Host), true}, []any{pid, start, tag, ok}); diff != "" {
		t.Errorf("%s: writer (-want +got):\n%s", path, diff)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "the prompt" {
		t.Errorf("content %q, %v", got, err)
	}
	remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s still there after remove: %v", path, err)
	}
	for _, bad := range [][2]string{{"", ".md"}, {"System", ".md"}, {"a/b", ""}, {"ok", "-x"}, {"ok", "md"}} {
		if _, _, err := TempFile(bad[0], bad[1], ""); err == nil || !strings.Contains(err.Error(), "kind") {
			t.Errorf("TempFile(%q, %q): err = %v, want a refusal", bad[0], bad[1], err)
		}
	}
}
