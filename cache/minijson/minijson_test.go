package minijson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cache/minijson"
)

func seedStrings(f *testing.F) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "<script>&</script>", "tab\tnew\nline\r\b\f\x00\x1f\x7f",
		"é ü 日本 🎉", "\u2028\u2029", "bad \xff utf8 \xed\xa0\x80", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"} {
		f.Add(s)
	}
}

func FuzzAppendStringMatchesEncodingJSON(f *testing.F) {
	seedStrings(f)
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := minijson.AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}

func seedDocuments(f *testing.F) {
	for _, s := range []string{`"x"`, `null`, `true`, `false`, `0`, `-1.5e+3`, `01`, `1.`, `.5`, `-`, `1e`, `[]`, `[1,2,]`, `{}`, `{"a":1,}`,
		`{"a":{"b":[1,"2",null,true,{"c":"\u00e9\ud83c\udf89\ud800x\\/"}]}}`, `"\u12"`, `"\x"`, "\"a\x01\"", `"unterminated`, " \t\n\r\"ws\" \n",
		`{"a" 1}`, `{1:2}`, `[1 2]`, `nul`, `tru`, `"\ud800\u0041"`, `"\udc00"`, "\"\xff\"", `{"k":"v"} x`, ``, `   `} {
		f.Add([]byte(s))
	}
}

// Every document encoding/json accepts, the decoder accepts, and no other.
func FuzzValidityMatchesEncodingJSON(f *testing.F) {
	seedDocuments(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		d := minijson.NewDecoder(data)
		err := d.Skip()
		if err == nil {
			err = d.Finish()
		}
		if valid := json.Valid(data); valid != (err == nil) {
			t.Fatalf("%q: encoding/json valid=%v, minijson error %v", data, valid, err)
		}
	})
}

// A string reads as encoding/json reads it into a Go string.
func FuzzStringMatchesEncodingJSON(f *testing.F) {
	seedDocuments(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		want := "unchanged"
		wantErr := json.Unmarshal(data, &want)
		d := minijson.NewDecoder(data)
		got, ok, err := d.String()
		if err == nil {
			err = d.Finish()
		}
		if !ok {
			got = "unchanged"
		}
		if (wantErr == nil) != (err == nil) || (err == nil && got != want) {
			t.Fatalf("%q: encoding/json %q, %v; minijson %q, %v", data, want, wantErr, got, err)
		}
	})
}

func TestObjectWalk(t *testing.T) {
	d := minijson.NewDecoder([]byte(` {"n": 7, "b": true, "s": "x", "skip": [1, {"y": null}], "null": null} `))
	got := map[string]any{}
	err := d.Object(func(key string) error {
		switch key {
		case "n":
			n, _, err := d.Int()
			got[key] = n
			return err
		case "b":
			b, _, err := d.Bool()
			got[key] = b
			return err
		case "s":
			s, _, err := d.String()
			got[key] = s
			return err
		case "null":
			isNull, err := d.Null()
			got[key] = isNull
			return err
		}
		return d.Skip()
	})
	if err == nil {
		err = d.Finish()
	}
	if err != nil || got["n"] != 7 || got["b"] != true || got["s"] != "x" || got["null"] != true {
		t.Fatalf("%v %v", got, err)
	}
	for doc, want := range map[string]error{`"str"`: minijson.ErrType, `[1]`: minijson.ErrType, `{"a":1`: nil} {
		err := minijson.NewDecoder([]byte(doc)).Object(func(string) error { return nil })
		var syntax *minijson.SyntaxError
		if want != nil && !errors.Is(err, want) || want == nil && !errors.As(err, &syntax) {
			t.Errorf("%s: %v", doc, err)
		}
	}
	if _, _, err := minijson.NewDecoder([]byte(`1.5`)).Int(); !errors.Is(err, minijson.ErrType) {
		t.Errorf("1.5 as an int: %v", err)
	}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	if err := minijson.NewDecoder([]byte(deep)).Skip(); err == nil || json.Valid([]byte(deep)) {
		t.Errorf("nesting beyond encoding/json's limit: %v", err)
	}
}

func FuzzKeyIsMatchesEncodingJSON(f *testing.F) {
	for _, k := range []string{"apiVersion", "APIVERSION", "apiversion", "apiVersİon", "\u212aind", "kind", "Kind", "ſpec", "spec", "spe", "specs", "\xffkind", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		doc, _ := json.Marshal(map[string]int{k: 1})
		for _, name := range []string{"apiVersion", "kind", "spec", "certificate-authority-data"} {
			var v struct {
				APIVersion int `json:"apiVersion"`
				Kind       int `json:"kind"`
				Spec       int `json:"spec"`
				CA         int `json:"certificate-authority-data"`
			}
			_ = json.Unmarshal(doc, &v)
			want := map[string]int{"apiVersion": v.APIVersion, "kind": v.Kind, "spec": v.Spec, "certificate-authority-data": v.CA}[name] == 1
			d := minijson.NewDecoder(doc)
			var got bool
			_ = d.Object(func(key string) error {
				got = minijson.KeyIs(key, name)
				return d.Skip()
			})
			if got != want {
				t.Fatalf("key %q as %s: encoding/json %v, KeyIs %v", k, name, want, got)
			}
		}
	})
}
