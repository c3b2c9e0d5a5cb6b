package claude

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/loop"
)

// The system prompt file's name says who wrote it, and nothing else is
// taken for such a name.
func TestSystemPromptName(t *testing.T) {
	writer := loop.Holder{Host: "boot.4026531836", PID: 4242, Start: 987654}
	f, err := os.CreateTemp(t.TempDir(), systemPromptPattern(writer))
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
	tests := []struct {
		name string
		file string
		want parsed
	}{
		{name: "made by Run", file: filepath.Base(f.Name()), want: parsed{4242, 987654, hostTag(writer.Host), true}},
		{name: "an older release's name, no writer", file: "ralph-system-prompt-123456.md"},
		{name: "not a number", file: "ralph-system-prompt-x-1-0000abcd-7.md"},
		{name: "another suffix", file: "ralph-system-prompt-1-1-0000abcd-7.txt"},
		{name: "another prefix", file: "ralph-other-1-1-0000abcd-7.md"},
		{name: "a field too many", file: "ralph-system-prompt-1-1-0000abcd-7-8.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got parsed
			got.PID, got.Start, got.Tag, got.OK = systemPromptWriter(tt.file)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("systemPromptWriter(%q) (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}
