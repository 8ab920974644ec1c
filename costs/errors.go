package costs

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/quotactl/quotactl/quota"
)

// ErrUnknownMethod is wrapped by Price, Charge and Estimate when a request
// or a method name matches nothing in the table and the table declares no
// default cost. A request is never silently free.
var ErrUnknownMethod = errors.New("costs: unknown method")

// ErrDeprecated is wrapped by Price for a request to a method the upstream
// has deprecated and no longer supports (Method.Deprecated), such as
// YouTube's comments.markAsSpam: the request is not sent.
var ErrDeprecated = errors.New("costs: deprecated method")

// SpecError is a problem in a cost table: what is wrong, in which field,
// and, for a table read from a file, the file and line. It wraps
// quota.ErrInvalid.
type SpecError struct {
	File  string // the file name given to Parse or Load; empty for a Spec built in Go
	Line  int    // 1-based line in File; 0 when unknown
	Field string // the field path, e.g. "methods[videos.list].cost.units"
	Msg   string // what is wrong
}

// Error returns "costs: FILE:LINE: FIELD: MSG", leaving out the parts that
// are unknown.
func (e *SpecError) Error() string {
	s := "costs: "
	if e.File != "" {
		s += e.File
		if e.Line > 0 {
			s += ":" + strconv.Itoa(e.Line)
		}
		s += ": "
	} else if e.Line > 0 {
		s += "line " + strconv.Itoa(e.Line) + ": "
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Msg
}

// Unwrap returns quota.ErrInvalid, so errors.Is(err, quota.ErrInvalid)
// holds for every bad table.
func (e *SpecError) Unwrap() error { return quota.ErrInvalid }

func specErrorf(field, format string, args ...any) *SpecError {
	return &SpecError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
