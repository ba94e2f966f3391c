// Command staticuid is a dev tool for the static pod UID (src/sources/static-uid/):
//
//	staticuid schema                              the internal core.Pod types as JSON
//	staticuid uid -node N (-file P | -url U) F... upstream's UID of each manifest F (each item of a PodList)
//
// The schema lists every type core.Pod reaches: each struct's fields in Go
// order with their Go type (as go-spew prints it) and the JSON key of the
// same-named field of the v1 type it is converted from, so the TypeScript
// printer can convert a defaulted v1 manifest and print it as go-spew does.
// The uid command decodes a manifest exactly as the kubelet's file and URL
// sources do (pkg/kubelet/config/common.go) and prints the UID they compute,
// with the dump it hashed: the oracle for the test fixtures.
package main

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/dump"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/kubernetes/pkg/util/hash"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: staticuid schema | staticuid uid -node N (-file P | -url U) manifest...")
	}
	switch os.Args[1] {
	case "schema":
		schema()
	case "uid":
		uid(os.Args[2:])
	default:
		fail("unknown command " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "staticuid:", msg)
	os.Exit(2)
}

type field struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	JSON   string `json:"json,omitempty"`
	Inline bool   `json:"inline,omitempty"`
	// V1Type is the Go type of the v1 field when it differs from Type's shape.
	V1Type string `json:"v1Type,omitempty"`
}

type typeInfo struct {
	Kind   string  `json:"kind"`
	Elem   string  `json:"elem,omitempty"`
	Key    string  `json:"key,omitempty"`
	Fields []field `json:"fields,omitempty"`
	// V1Only: fields of the v1 type with no same-named internal field (custom conversions).
	V1Only []field `json:"v1Only,omitempty"`
}

func jsonTag(f reflect.StructField) (name string, inline bool) {
	tag := f.Tag.Get("json")
	parts := strings.Split(tag, ",")
	for _, p := range parts[1:] {
		if p == "inline" {
			inline = true
		}
	}
	if parts[0] == "" && f.Anonymous {
		inline = true
	}
	return parts[0], inline
}

// shape is a type's structure with package names dropped, to spot v1 fields
// whose type is not the internal one's.
func shape(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Ptr:
		return "*" + shape(t.Elem())
	case reflect.Slice:
		return "[]" + shape(t.Elem())
	case reflect.Map:
		return "map[" + shape(t.Key()) + "]" + shape(t.Elem())
	case reflect.Struct:
		return "struct " + t.Name()
	default:
		return t.Kind().String()
	}
}

func schema() {
	v1types := map[string]reflect.Type{}
	var collectV1 func(t reflect.Type)
	collectV1 = func(t reflect.Type) {
		for t.Kind() == reflect.Ptr || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		if _, seen := v1types[t.Name()]; seen {
			return
		}
		v1types[t.Name()] = t
		for i := 0; i < t.NumField(); i++ {
			collectV1(t.Field(i).Type)
		}
	}
	collectV1(reflect.TypeOf(corev1.Pod{}))

	types := map[string]*typeInfo{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		name := t.String()
		if _, seen := types[name]; seen {
			return
		}
		info := &typeInfo{Kind: t.Kind().String()}
		types[name] = info
		switch t.Kind() {
		case reflect.Ptr, reflect.Slice, reflect.Array:
			info.Elem = t.Elem().String()
			walk(t.Elem())
		case reflect.Map:
			info.Key = t.Key().String()
			info.Elem = t.Elem().String()
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			v1t, hasV1 := v1types[t.Name()]
			if t.PkgPath() != "k8s.io/kubernetes/pkg/apis/core" {
				// metav1 and other shared types: the decoded type is this one.
				v1t, hasV1 = t, true
			}
			internal := map[string]bool{}
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				internal[f.Name] = true
				out := field{Name: f.Name, Type: f.Type.String()}
				if hasV1 {
					if vf, ok := v1t.FieldByName(f.Name); ok && len(vf.Index) == 1 {
						out.JSON, out.Inline = jsonTag(vf)
						if shape(vf.Type) != shape(f.Type) {
							out.V1Type = vf.Type.String()
						}
					}
				}
				info.Fields = append(info.Fields, out)
				walk(f.Type)
			}
			if hasV1 && v1t != t {
				for i := 0; i < v1t.NumField(); i++ {
					vf := v1t.Field(i)
					if !internal[vf.Name] {
						j, inline := jsonTag(vf)
						info.V1Only = append(info.V1Only, field{Name: vf.Name, Type: vf.Type.String(), JSON: j, Inline: inline})
					}
				}
			}
		}
	}
	walk(reflect.TypeOf(api.Pod{}))

	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	sort.Strings(names)
	// One type per line: a reviewable diff when upstream changes.
	fmt.Println("{")
	for i, n := range names {
		b, err := json.Marshal(types[n])
		if err != nil {
			fail(err.Error())
		}
		sep := ","
		if i == len(names)-1 {
			sep = ""
		}
		fmt.Printf("  %q: %s%s\n", n, b, sep)
	}
	fmt.Println("}")
}

func uid(args []string) {
	fs := flag.NewFlagSet("uid", flag.ExitOnError)
	node := fs.String("node", "", "node name")
	file := fs.String("file", "", "the manifest's path as the file source names it")
	url := fs.String("url", "", "the manifest URL (URL source)")
	fs.Parse(args)
	enc := json.NewEncoder(os.Stdout)
	for _, path := range fs.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			fail(err.Error())
		}
		js, err := utilyaml.ToJSON(data)
		if err != nil {
			fail(path + ": " + err.Error())
		}
		obj, err := runtime.Decode(legacyscheme.Codecs.UniversalDecoder(), js)
		if err != nil {
			fail(path + ": " + err.Error())
		}
		// A PodList (URL source): each item, as tryDecodePodList hashes it.
		var pods []*api.Pod
		switch o := obj.(type) {
		case *api.Pod:
			pods = []*api.Pod{o}
		case *api.PodList:
			for i := range o.Items {
				pods = append(pods, &o.Items[i])
			}
		default:
			fail(fmt.Sprintf("%s: not a Pod or PodList: %T", path, obj))
		}
		for _, pod := range pods {
			d := dump.ForHash(pod)
			hasher := md5.New()
			hash.DeepHashObject(hasher, pod)
			if *url == "" {
				fmt.Fprintf(hasher, "host:%s", *node)
				fmt.Fprintf(hasher, "file:%s", *file)
			} else {
				fmt.Fprintf(hasher, "url:%s", *url)
			}
			enc.Encode(map[string]string{"manifest": path, "uid": hex.EncodeToString(hasher.Sum(nil)), "dump": d})
		}
	}
}
