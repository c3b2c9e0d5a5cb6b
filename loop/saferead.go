package loop

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/safefile"
)

// The files the loop reads from the project to build a prompt — prompt
// overrides, skills, specs, a feature's spec and plan notes — lie where
// an agent can write. They are read through package safefile from the
// project root: a symbolic link anywhere below the root is refused, even
// one that stays inside it (a spec linked to .ralph/db.json, or to
// ~/.ssh/id_rsa, would send a secret to the model's API). A refusal is an
// error naming the file: the run stops, or does not start, rather than
// build a prompt without a file the user meant it to have. Hard links are
// read: making one needs access to the target from where the agent
// stands.

// readSpec reads a feature's spec or plan file: path is relative to root,
// or absolute (a file the user named outside the project: its own
// directory is trusted then). A missing or unreadable file reads as "";
// a link refused is an error.
func readSpec(root, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	data, err := safefile.ReadFile(safefile.Within(root, path, filepath.Dir(path)), path)
	if errors.Is(err, safefile.ErrLink) {
		return "", fmt.Errorf("loop: %w", err)
	}
	if err != nil {
		return "", nil
	}
	return string(data), nil
}

// readSkills lists the skills under <root>/.ralph/skills: every
// directory's SKILL.md, in name order.
func readSkills(root string) ([]Skill, error) {
	dir := filepath.Join(".ralph", "skills")
	entries, err := safefile.ReadDir(root, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loop: skills: %w", err)
	}
	var skills []Skill
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 && !e.IsDir() {
			continue // a file beside the skills
		}
		rel := filepath.Join(dir, e.Name(), "SKILL.md")
		data, err := safefile.ReadFile(root, rel)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("loop: skill %s: %w", filepath.Join(root, rel), err)
		}
		fm := frontmatter(string(data))
		if fm["description"] == "" {
			continue
		}
		name := fm["name"]
		if name == "" {
			name = e.Name()
		}
		skills = append(skills, Skill{Name: name, Description: fm["description"], Path: rel})
	}
	return skills, nil
}

// readSpecs reads <root>/specs/*.md in name order: see ReadSpecs.
func readSpecs(root string) ([]SpecFile, error) {
	entries, err := safefile.ReadDir(root, SpecsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loop: specs: %w", err)
	}
	var specs []SpecFile
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".md") || e.IsDir() {
			continue // a directory named x.md
		}
		rel := filepath.Join(SpecsDir, e.Name())
		data, err := safefile.ReadFile(root, rel)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("loop: spec %s: %w", filepath.Join(root, rel), err)
		}
		if strings.TrimSpace(string(data)) == "" {
			continue
		}
		specs = append(specs, SpecFile{Path: filepath.ToSlash(rel), Content: string(data)})
	}
	return specs, nil
}

// featureContext is feature f's spec and plan notes for a prompt.
func featureContext(root string, f Feature) (*FeatureContext, error) {
	spec, err := readSpec(root, f.SpecPath)
	if err != nil {
		return nil, err
	}
	plan, err := readSpec(root, f.PlanPath)
	if err != nil {
		return nil, err
	}
	return &FeatureContext{Name: f.Name, Spec: spec, Plan: plan}, nil
}
