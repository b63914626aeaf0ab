// Package minijson reads and writes the few small JSON documents on the
// cached-login path (KUBERNETES_EXEC_INFO, a cache entry, a cache key, the
// ExecCredential printed) without reflection.
//
// kubectl starts `pinniped login` before nearly every request, and the
// process lives about two milliseconds. encoding/json builds a codec per Go
// type by reflection the first time it meets the type; with four types met
// once each, that was 0.28 ms, an eighth of the run. This package does the
// same work directly. What it writes is byte for byte what encoding/json
// writes, and it accepts exactly the documents encoding/json accepts; the
// tests hold it to both by comparing the two on fuzzed input.
package minijson

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, escaped as encoding/json escapes
// it (HTML-safe, U+2028 and U+2029 escaped, invalid UTF-8 replaced).
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ErrType reports a value of the wrong JSON type for where it appears.
var ErrType = errors.New("wrong JSON type")

// SyntaxError is malformed JSON.
type SyntaxError struct {
	Offset int
	What   string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.What)
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// Decoder reads one JSON document front to back. Callers walk it with
// Object and read each value with one of String, Bool, Number, Raw, Null
// or Skip; Finish checks that nothing but whitespace follows.
type Decoder struct {
	data  []byte
	i     int
	depth int
}

// NewDecoder reads data.
func NewDecoder(data []byte) *Decoder { return &Decoder{data: data} }

func (d *Decoder) syntax(what string) error { return &SyntaxError{Offset: d.i, What: what} }

func (d *Decoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// Peek is the first byte of the next value (0 at the end): '{', '[', '"',
// 't', 'f', 'n', or a number's first byte.
func (d *Decoder) Peek() byte {
	d.ws()
	if d.i == len(d.data) {
		return 0
	}
	return d.data[d.i]
}

// Null consumes a null and reports whether there was one.
func (d *Decoder) Null() (bool, error) {
	if d.Peek() != 'n' {
		return false, nil
	}
	return true, d.literal("null")
}

func (d *Decoder) literal(word string) error {
	if len(d.data)-d.i < len(word) || string(d.data[d.i:d.i+len(word)]) != word {
		return d.syntax("invalid literal")
	}
	d.i += len(word)
	return nil
}

// Object reads an object, calling field for each member; field must read
// the member's value. A null is read as no object at all, as
// encoding/json leaves a struct untouched by null.
func (d *Decoder) Object(field func(key string) error) error {
	switch d.Peek() {
	case 'n':
		return d.literal("null")
	case '{':
	default:
		if err := d.Skip(); err != nil {
			return err
		}
		return ErrType
	}
	return d.container('}', func() error {
		if d.Peek() != '"' {
			return d.syntax("object key is not a string")
		}
		key, err := d.str()
		if err != nil {
			return err
		}
		if d.Peek() != ':' {
			return d.syntax("missing colon after object key")
		}
		d.i++
		return field(key)
	})
}

// container reads the members of the object or the elements of the array
// opened at d.i, up to end ('}' or ']'), calling each for every one.
func (d *Decoder) container(end byte, each func() error) error {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxDepth {
		return d.syntax("exceeded max depth")
	}
	d.i++
	if d.Peek() == end {
		d.i++
		return nil
	}
	for {
		if err := each(); err != nil {
			return err
		}
		switch d.Peek() {
		case ',':
			d.i++
		case end:
			d.i++
			return nil
		default:
			return d.syntax("missing comma or " + string(end))
		}
	}
}

// String reads a string. A null leaves the caller's value alone
// (null is false); any other type is ErrType.
func (d *Decoder) String() (s string, ok bool, err error) {
	switch d.Peek() {
	case '"':
		s, err = d.str()
		return s, err == nil, err
	case 'n':
		return "", false, d.literal("null")
	}
	if err := d.Skip(); err != nil {
		return "", false, err
	}
	return "", false, ErrType
}

// StringInto reads a string into *dst, as encoding/json decodes a string
// field: null leaves *dst as it was.
func (d *Decoder) StringInto(dst *string) error {
	s, ok, err := d.String()
	if ok {
		*dst = s
	}
	return err
}

// Bool reads true or false; null is ok=false, any other type ErrType.
func (d *Decoder) Bool() (b, ok bool, err error) {
	switch d.Peek() {
	case 't':
		return true, true, d.literal("true")
	case 'f':
		return false, true, d.literal("false")
	case 'n':
		return false, false, d.literal("null")
	}
	if err := d.Skip(); err != nil {
		return false, false, err
	}
	return false, false, ErrType
}

// Int reads an integer as encoding/json reads one into an int; null is
// ok=false; a fraction, exponent or other type is ErrType.
func (d *Decoder) Int() (n int, ok bool, err error) {
	text, ok, err := d.numberText()
	if !ok || err != nil {
		return 0, false, err
	}
	v, perr := strconv.ParseInt(text, 10, strconv.IntSize)
	if perr != nil {
		return 0, false, ErrType
	}
	return int(v), true, nil
}

// Uint8 reads a number as encoding/json reads one into a uint8 (an element
// of a []byte written as an array); null is ok=false; anything else that
// is not a plain integer from 0 to 255 is ErrType.
func (d *Decoder) Uint8() (b byte, ok bool, err error) {
	text, ok, err := d.numberText()
	if !ok || err != nil {
		return 0, false, err
	}
	v, perr := strconv.ParseUint(text, 10, 8)
	if perr != nil {
		return 0, false, ErrType
	}
	return byte(v), true, nil
}

// numberText reads a number and returns it as written; null is ok=false,
// any other type ErrType.
func (d *Decoder) numberText() (string, bool, error) {
	switch c := d.Peek(); {
	case c == 'n':
		return "", false, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		start := d.i
		if err := d.number(); err != nil {
			return "", false, err
		}
		return string(d.data[start:d.i]), true, nil
	}
	if err := d.Skip(); err != nil {
		return "", false, err
	}
	return "", false, ErrType
}

// Array reads an array, calling elem for each element; elem must read it.
func (d *Decoder) Array(elem func() error) error {
	if d.Peek() != '[' {
		if err := d.Skip(); err != nil {
			return err
		}
		return ErrType
	}
	return d.container(']', elem)
}

// Raw reads any value and returns its bytes as they appear, for a type's
// own UnmarshalJSON (as encoding/json hands them over).
func (d *Decoder) Raw() ([]byte, error) {
	d.ws()
	start := d.i
	if err := d.Skip(); err != nil {
		return nil, err
	}
	return d.data[start:d.i], nil
}

// Skip reads and checks any value.
func (d *Decoder) Skip() error {
	switch c := d.Peek(); {
	case c == '{':
		return d.Object(func(string) error { return d.Skip() })
	case c == '[':
		return d.Array(d.Skip)
	case c == '"':
		_, err := d.str()
		return err
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 0:
		return d.syntax("unexpected end of JSON input")
	}
	return d.syntax("invalid character")
}

// Finish checks that only whitespace remains.
func (d *Decoder) Finish() error {
	if d.Peek() != 0 || d.i != len(d.data) {
		return d.syntax("invalid character after top-level value")
	}
	return nil
}

func (d *Decoder) digits() int {
	n := 0
	for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *Decoder) number() error {
	if d.i < len(d.data) && d.data[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.data) && d.data[d.i] == '0':
		d.i++
	case d.i < len(d.data) && d.data[d.i] >= '1' && d.data[d.i] <= '9':
		d.digits()
	default:
		return d.syntax("invalid number")
	}
	if d.i < len(d.data) && d.data[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return d.syntax("invalid number")
		}
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return d.syntax("invalid number")
		}
	}
	return nil
}

// str reads a string at d.i (a '"'), unescaping as encoding/json does:
// invalid UTF-8 and unpaired surrogates become U+FFFD. It is one function
// of 89 lines on purpose: it runs for every string of every cached login
// the lean front reads, and its fast path (nothing to unescape) and slow
// path share the escape table inline, where helpers would cost calls.
func (d *Decoder) str() (string, error) {
	d.i++ // the opening quote
	start := d.i
	// The common case: nothing to unescape or replace.
	for d.i < len(d.data) {
		c := d.data[d.i]
		if c == '"' {
			s := string(d.data[start:d.i])
			d.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		d.i++
	}
	out := append([]byte(nil), d.data[start:d.i]...)
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out), nil
		case c < 0x20:
			return "", d.syntax("control character in string")
		case c == '\\':
			if d.i+1 >= len(d.data) {
				return "", d.syntax("unexpected end of JSON input")
			}
			e := d.data[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := d.hex4(d.i)
				if !ok {
					return "", d.syntax("invalid \\u escape")
				}
				d.i += 4
				if utf16.IsSurrogate(r) {
					if d.i+1 < len(d.data) && d.data[d.i] == '\\' && d.data[d.i+1] == 'u' {
						if r2, ok := d.hex4(d.i + 2); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								out = utf8.AppendRune(out, dec)
								d.i += 6
								break
							}
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", d.syntax("invalid escape in string")
			}
		case c < utf8.RuneSelf:
			// A run of plain ASCII is copied at once.
			j := d.i + 1
			for j < len(d.data) {
				if c := d.data[j]; c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
					break
				}
				j++
			}
			out = append(out, d.data[d.i:j]...)
			d.i = j
		default:
			r, size := utf8.DecodeRune(d.data[d.i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, d.data[d.i:d.i+size]...)
			}
			d.i += size
		}
	}
	return "", d.syntax("unexpected end of JSON input")
}

func (d *Decoder) hex4(at int) (rune, bool) {
	if at+4 > len(d.data) {
		return 0, false
	}
	var r rune
	for _, c := range d.data[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// KeyIs reports whether encoding/json would decode an object member named
// key into a struct field named name: exactly, or equal under Unicode case
// folding (its foldName is defined to agree with EqualFold).
func KeyIs(key, name string) bool {
	return key == name || strings.EqualFold(key, name)
}
