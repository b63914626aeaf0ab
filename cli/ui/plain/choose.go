package plain

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Choose lists items numbered and reads the number of one from in.
func Choose(in io.Reader, out io.Writer, title string, items []string) (int, error) {
	fmt.Fprintln(out, title)
	for i, s := range items {
		fmt.Fprintf(out, "  %d) %s\n", i+1, s)
	}
	sc := bufio.NewScanner(in)
	for {
		fmt.Fprintf(out, "Choose [1-%d]: ", len(items))
		if !sc.Scan() {
			return 0, errors.New("nothing chosen")
		}
		n, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err == nil && n >= 1 && n <= len(items) {
			return n - 1, nil
		}
	}
}
