// Package shellquote writes a word so that a POSIX shell reads it back as
// it is: for the commands pinniped tells a person to copy and run.
package shellquote

import "strings"

// Quote is s as one shell word: as it is when it holds only characters no
// shell treats specially (letters, digits and / . - _), else in single
// quotes. Control characters are for the caller to refuse or escape: a
// quoted newline is still a line break on the person's screen.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !strings.ContainsRune("/.-_", r) && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
