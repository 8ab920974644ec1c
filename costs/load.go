package costs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Load reads a cost table from a JSON or YAML file (see the package
// documentation for the schema). A file that cannot be read wraps the
// os error; a bad file is a *SpecError naming the file, line and field.
func Load(path string) (*Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("costs: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a cost table from data. name is the file name used in errors;
// its extension picks the format (".json", or ".yaml"/".yml"); for another
// name, data starting with '{' is read as JSON, anything else as YAML. A
// price file the table's spend section names (Spend.Prices) is read
// relative to name's directory. A bad table is a *SpecError naming the
// line and field.
func Parse(name string, data []byte) (*Table, error) {
	spec, lines, err := parseSpec(name, data)
	if err != nil {
		return nil, err
	}
	t, err := newTable(spec, filepath.Dir(name))
	if err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			se.File = name
			se.Line = lines.find(se.Field)
		}
		return nil, err
	}
	return t, nil
}

// ParseSpec reads a table's Spec from data, as Parse does, without building
// the Table (New does).
func ParseSpec(name string, data []byte) (Spec, error) {
	spec, _, err := parseSpec(name, data)
	return spec, err
}

func parseSpec(name string, data []byte) (Spec, lineMap, error) {
	var root *node
	var err error
	if isJSON(name, data) {
		root, err = parseJSON(data)
	} else {
		root, err = parseYAML(data)
	}
	if err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			se.File = name
		}
		return Spec{}, nil, err
	}
	d := &specDecoder{lines: lineMap{}}
	spec, err := d.spec(root)
	if err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			se.File = name
		}
		return Spec{}, nil, err
	}
	return spec, d.lines, nil
}

func isJSON(name string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return true
	case ".yaml", ".yml":
		return false
	}
	return bytes.HasPrefix(bytes.TrimSpace(data), []byte("{"))
}
