package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
)

// BeadsJSON is the issues of a beads JSON document as a TaskSource: what
// `bd list --json --all` (and `bd ready --json`, `bd show --json`)
// print — an array of issues, or, with BD_JSON_ENVELOPE=1 or
// --skip-labels, an object holding the array under "data" or "issues".
// Each issue maps as a `bd export` line does (see ReadJSONL). Its tasks
// carry no line (ImportTask.Line 0): errors name them by id.
type BeadsJSON struct {
	tasks   []ImportTask
	deleted []string
}

// ReadBeadsJSON reads a beads JSON document whole. Errors name the issue:
// "issue 3: …".
func ReadBeadsJSON(r io.Reader) (*BeadsJSON, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	items, err := beadsItems(data)
	if err != nil {
		return nil, err
	}
	out := &BeadsJSON{}
	deleted := map[string]bool{}
	for i, raw := range items {
		var bi beadsIssue
		if err := json.Unmarshal(raw, &bi); err != nil {
			return nil, fmt.Errorf("issue %d: %w", i+1, jsonError(err))
		}
		t, err := fromBeads(bi)
		switch {
		case errors.Is(err, errTombstone):
			deleted[bi.ID] = true
			out.deleted = append(out.deleted, bi.ID)
			continue
		case err != nil:
			return nil, fmt.Errorf("issue %d: %w", i+1, err)
		}
		out.tasks = append(out.tasks, t)
	}
	out.tasks = dropDeleted(out.tasks, deleted)
	return out, nil
}

// beadsItems returns the issues of a beads JSON document.
func beadsItems(data []byte) ([]json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	var items []json.RawMessage
	if len(data) > 0 && data[0] == '[' {
		if err := json.Unmarshal(data, &items); err != nil {
			return nil, fmt.Errorf("beads JSON: %w", jsonError(err))
		}
		return items, nil
	}
	var env struct {
		Data   *[]json.RawMessage `json:"data"`
		Issues *[]json.RawMessage `json:"issues"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("beads JSON: %w", jsonError(err))
	}
	switch {
	case env.Data != nil:
		return *env.Data, nil
	case env.Issues != nil:
		return *env.Issues, nil
	}
	return nil, errors.New(`beads JSON: an object without "data" or "issues" (want what bd list --json prints)`)
}

// Tasks implements TaskSource.
func (b *BeadsJSON) Tasks() iter.Seq2[ImportTask, error] { return TaskSlice(b.tasks).Tasks() }

// Dropped implements TaskSource: the issues that are no tasks (pinned).
func (b *BeadsJSON) Dropped() []string { return b.deleted }
