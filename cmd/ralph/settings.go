package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// hookChange says what addSessionEndHook did to the settings.
type hookChange int

const (
	hookKept     hookChange = iota // the hook was there already
	hookAdded                      // a SessionEnd entry was added
	hookReplaced                   // an earlier ralph's hook command was replaced in place
)

// addSessionEndHook gives the Claude Code settings document data (empty: a
// new document) ralph's SessionEnd hook running command.
//
//   - When an entry runs command already, nothing changes (out is nil).
//   - When entries run an earlier ralph's hook (isOldSessionEndHook), the
//     command strings of those hooks are replaced in place and every other
//     byte of the file is kept: the user's own hooks and layout stay as they
//     were.
//   - Otherwise an entry is appended to hooks.SessionEnd; everything already
//     there is kept, in its order, and the result is indented with two
//     spaces.
func addSessionEndHook(data []byte, command string) (out []byte, change hookChange, err error) {
	root := &jsonObject{}
	if len(bytes.TrimSpace(data)) > 0 {
		v, err := decodeOrdered(data)
		if err != nil {
			return nil, hookKept, err
		}
		obj, ok := v.(*jsonObject)
		if !ok {
			return nil, hookKept, errors.New("the settings are not a JSON object")
		}
		root = obj
	}

	hooks := &jsonObject{}
	if v, ok := root.get("hooks"); ok {
		if hooks, ok = v.(*jsonObject); !ok {
			return nil, hookKept, errors.New(`"hooks" is not an object`)
		}
	}
	var entries []any
	if v, ok := hooks.get("SessionEnd"); ok && v != nil {
		if entries, ok = v.([]any); !ok {
			return nil, hookKept, errors.New(`"hooks.SessionEnd" is not a list`)
		}
	}
	commands := hookCommands(entries)
	if slices.Contains(commands, command) && !slices.ContainsFunc(commands, isOldSessionEndHook) {
		return nil, hookKept, nil
	}
	if slices.ContainsFunc(commands, isOldSessionEndHook) {
		out, err := replaceStrings(data, "command", isOldSessionEndHook, command)
		return out, hookReplaced, err
	}

	hook := &jsonObject{}
	hook.set("type", "command")
	hook.set("command", command)
	entry := &jsonObject{}
	entry.set("hooks", []any{hook})
	hooks.set("SessionEnd", append(entries, entry))
	root.set("hooks", hooks)

	var buf bytes.Buffer
	if err := encodeOrdered(&buf, root); err != nil {
		return nil, hookKept, err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, buf.Bytes(), "", "  "); err != nil {
		return nil, hookKept, err
	}
	pretty.WriteByte('\n')
	return pretty.Bytes(), hookAdded, nil
}

// hookCommands lists the commands of the hooks in SessionEnd entries.
func hookCommands(entries []any) []string {
	var out []string
	for _, e := range entries {
		eo, ok := e.(*jsonObject)
		if !ok {
			continue
		}
		hs, _ := eo.get("hooks")
		list, _ := hs.([]any)
		for _, h := range list {
			ho, ok := h.(*jsonObject)
			if !ok {
				continue
			}
			cmd, _ := ho.get("command")
			if s, ok := cmd.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// replaceStrings returns data with every string value of an object member
// named key that match accepts replaced by replacement, and every other
// byte as it was. data must be valid JSON.
func replaceStrings(data []byte, key string, match func(string) bool, replacement string) ([]byte, error) {
	var enc bytes.Buffer
	if err := encodeOrdered(&enc, replacement); err != nil {
		return nil, err
	}
	type span struct{ start, end int }
	var spans []span
	dec := json.NewDecoder(bytes.NewReader(data))
	// The decoder's position: in each open object, whether the next token
	// is a member name, and the name of the member whose value comes next.
	type frame struct {
		object, wantKey bool
		name            string
	}
	var stack []frame
	top := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return &stack[len(stack)-1]
	}
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, invalidJSON(err)
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, frame{object: true, wantKey: true})
				continue
			case '[':
				stack = append(stack, frame{})
				continue
			}
			stack = stack[:len(stack)-1] // '}' or ']': a value ended
		} else if f := top(); f != nil && f.object && f.wantKey {
			f.name, _ = tok.(string)
			f.wantKey = false
			continue
		} else if s, ok := tok.(string); ok && f != nil && f.object && f.name == key && match(s) {
			// The token's text starts at its opening quote, after the
			// whitespace and ':' between it and the member name.
			end := int(dec.InputOffset())
			start := int(before) + bytes.IndexByte(data[before:end], '"')
			spans = append(spans, span{start, end})
		}
		// A value ended: its object wants the next member name.
		if f := top(); f != nil && f.object {
			f.wantKey = true
		}
	}
	out := make([]byte, 0, len(data)+len(spans)*enc.Len())
	prev := 0
	for _, s := range spans {
		out = append(out, data[prev:s.start]...)
		out = append(out, enc.Bytes()...)
		prev = s.end
	}
	return append(out, data[prev:]...), nil
}

// jsonObject is a JSON object that remembers its key order, so that a
// settings file ralph edits keeps the layout its owner gave it.
type jsonObject struct {
	keys []string
	vals map[string]any
}

func (o *jsonObject) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *jsonObject) set(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// decodeOrdered decodes one JSON document into *jsonObject, []any,
// json.Number, string, bool and nil values.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, invalidJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: more than one value")
	}
	return v, nil
}

func invalidJSON(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of file")
	}
	return fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := &jsonObject{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				obj.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil
	}
}

// encodeOrdered writes v as compact JSON, without HTML escaping (shell
// commands are full of & and >).
func encodeOrdered(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case *jsonObject:
		buf.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeOrdered(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := encodeOrdered(buf, t.vals[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeOrdered(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(t); err != nil {
			return err
		}
		buf.Write(bytes.TrimRight(b.Bytes(), "\n"))
	}
	return nil
}
