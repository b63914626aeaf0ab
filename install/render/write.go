package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// WriteYAML writes a multi-document YAML stream. Each RBAC rule is preceded
// by a comment saying why the agent needs it.
func WriteYAML(w io.Writer, objs []Object, header string) error {
	var buf bytes.Buffer
	if header != "" {
		for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
			fmt.Fprintf(&buf, "# %s\n", line)
		}
	}
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("render %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(commentRules(b, o.RuleReasons))
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// commentRules inserts "# why" above the i-th top-level rule. The marshaller
// writes keys sorted, so every rule starts with "- apiGroups:".
func commentRules(doc []byte, reasons []string) []byte {
	if len(reasons) == 0 {
		return doc
	}
	var out bytes.Buffer
	i := 0
	for _, line := range strings.SplitAfter(string(doc), "\n") {
		if strings.HasPrefix(line, "- apiGroups:") && i < len(reasons) {
			fmt.Fprintf(&out, "# %s\n", reasons[i])
			i++
		}
		out.WriteString(line)
	}
	return out.Bytes()
}

// WriteJSON writes a v1 List holding every object.
func WriteJSON(w io.Writer, objs []Object) error {
	items := make([]any, len(objs))
	for i, o := range objs {
		items[i] = o.Object
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}
