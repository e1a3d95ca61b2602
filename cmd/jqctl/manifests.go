package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"
)

// maxManifestDocuments bounds what jqctl reads from one -f.
const maxManifestDocuments = 10000

// readManifests reads every document of -f (YAML or JSON, several
// documents, Lists expanded) with apimachinery's decoder.
func readManifests(cmd *cobra.Command, file string) ([]*unstructured.Unstructured, error) {
	data, err := readInput(cmd, file)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for n := 1; ; n++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", file, n, err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", file, n, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
		} else {
			out = append(out, u)
		}
		if len(out) > maxManifestDocuments {
			return nil, fmt.Errorf("%s: more than %d objects", file, maxManifestDocuments)
		}
	}
}

// withNamespace sets -n on the namespaced documents that name none, and
// refuses one that names another, as kubectl does.
func withNamespace(objs []*unstructured.Unstructured, ns string) error {
	if ns == "" {
		return nil
	}
	for _, u := range objs {
		k, ok := kindOf(u.GetKind())
		if !(ok && k.Namespaced) && u.GetKind() != "Workload" && u.GetKind() != "Job" {
			continue
		}
		switch u.GetNamespace() {
		case "":
			u.SetNamespace(ns)
		case ns:
		default:
			return fmt.Errorf("the namespace from the provided object %q does not match the namespace %q. You must pass '--namespace=%s' to perform this operation",
				u.GetNamespace(), ns, u.GetNamespace())
		}
	}
	return nil
}

func asList(objs []*unstructured.Unstructured) ([]byte, error) {
	items := make([]any, 0, len(objs))
	for _, u := range objs {
		items = append(items, u.Object)
	}
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

func applyCmd(stdout io.Writer) *cobra.Command {
	var file, namespace, dryRun string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update ResourceFlavors, ClusterQueues, LocalQueues, priority classes and the Configuration",
		Long: `Create or update configuration objects. A document read back with
jqctl get -o yaml applies as it is: its status and server-set metadata are
ignored. -n sets the namespace of LocalQueues that name none;
--dry-run=server has the server validate, authorize and say what would
change, without changing anything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch dryRun {
			case "", "none", "server":
			default:
				return fmt.Errorf("--dry-run: want none or server, not %q", dryRun)
			}
			data, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			if namespace != "" {
				objs, err := readManifests(cmd, file)
				if err != nil {
					return err
				}
				if err := withNamespace(objs, namespace); err != nil {
					return err
				}
				if data, err = asList(objs); err != nil {
					return err
				}
			}
			var out struct {
				Applied []struct{ Kind, Name, Namespace, Action string } `json:"applied"`
			}
			path := "/v1/apply"
			if dryRun == "server" {
				path += "?dryRun=All"
			}
			if err := newClient(cmd).do("POST", path, contentType(data), data, &out); err != nil {
				return err
			}
			suffix := ""
			if dryRun == "server" {
				suffix = " (server dry run)"
			}
			for _, a := range out.Applied {
				name := a.Name
				if a.Namespace != "" {
					name = a.Namespace + "/" + a.Name
				}
				fmt.Fprintf(stdout, "%s/%s %s%s\n", strings.ToLower(a.Kind), name, a.Action, suffix)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "manifest file (YAML or JSON, several documents allowed; - for stdin)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the namespace of namespaced objects that name none")
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", `"server": validate and report without applying`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
	return cmd
}

// deletePath is the API path that deletes an object.
func deletePath(k kind, ns, name string) string {
	if k.Kind == "Workload" {
		return "/v1/workloads/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	}
	if k.Namespaced {
		return "/v1/" + k.Resource + "/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	}
	return "/v1/" + k.Resource + "/" + url.PathEscape(name)
}

func deleteCmd(stdout io.Writer) *cobra.Command {
	var file, namespace string
	cmd := &cobra.Command{
		Use:   "delete KIND NAME... | delete -f FILE",
		Short: "Delete workloads (releasing their quota) or configuration objects",
		Long: `Delete objects by kind and name (short names: cq, lq, rf, wl, wpc, pc),
NAMESPACE/NAME or -n for namespaced kinds, or every object of -f FILE.`,
		ValidArgsFunction: completeObjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient(cmd)
			type target struct {
				k        kind
				ns, name string
			}
			var targets []target
			if file != "" {
				if len(args) > 0 {
					return fmt.Errorf("give -f or KIND NAME, not both")
				}
				objs, err := readManifests(cmd, file)
				if err != nil {
					return err
				}
				if err := withNamespace(objs, namespace); err != nil {
					return err
				}
				for _, u := range objs {
					k, ok := kindOf(u.GetKind())
					if !ok || k.Kind == "Configuration" {
						return fmt.Errorf("%s %s: jqctl cannot delete this kind", u.GetKind(), u.GetName())
					}
					targets = append(targets, target{k, u.GetNamespace(), u.GetName()})
				}
			} else {
				if len(args) < 2 {
					return fmt.Errorf("want KIND NAME... or -f FILE")
				}
				k, err := lookupKind(args[0])
				if err != nil {
					return err
				}
				for _, n := range args[1:] {
					ns, name := namespace, n
					if k.Namespaced {
						if a, b, ok := strings.Cut(n, "/"); ok {
							ns, name = a, b
						}
						if ns == "" {
							ns = c.namespace
						}
						if ns == "" {
							return fmt.Errorf("%s %q: give its namespace with -n, or as NAMESPACE/NAME", k.Kind, n)
						}
					}
					targets = append(targets, target{k, ns, name})
				}
			}
			for _, t := range targets {
				if err := c.do("DELETE", deletePath(t.k, t.ns, t.name), "", nil, nil); err != nil {
					return err
				}
				name := t.name
				if t.k.Namespaced {
					name = t.ns + "/" + t.name
				}
				fmt.Fprintf(stdout, "%s/%s deleted\n", strings.ToLower(t.k.Kind), name)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "delete every object of this manifest (- for stdin)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the namespace of namespaced objects")
	return cmd
}

// comparable strips what the server writes (status, server-set
// metadata) so that diff compares what apply would change.
func comparable(u *unstructured.Unstructured) ([]byte, error) {
	c := u.DeepCopy()
	delete(c.Object, "status")
	for _, f := range []string{"resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink", "uid"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	if md, ok := c.Object["metadata"].(map[string]any); ok && len(md) == 0 {
		delete(c.Object, "metadata")
	}
	return yaml.Marshal(c.Object)
}

func diffCmd(stdout io.Writer) *cobra.Command {
	var file, namespace string
	cmd := &cobra.Command{
		Use:   "diff -f FILE",
		Short: "Show what apply -f FILE would change (exit 1 when something would)",
		Long: `Compare each object of FILE with the server's, status and server-set
metadata left out, with "diff -u -N" (or $KUBECTL_EXTERNAL_DIFF), as
kubectl diff does. Exit status 0: no difference; 1: differences.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := readManifests(cmd, file)
			if err != nil {
				return err
			}
			if err := withNamespace(objs, namespace); err != nil {
				return err
			}
			c := newClient(cmd)
			// What apply would store: the server's dry run decodes and
			// defaults each object as it would for real.
			body, err := asList(objs)
			if err != nil {
				return err
			}
			var planned struct {
				Applied []struct {
					Object map[string]any `json:"object"`
				} `json:"applied"`
			}
			if err := c.do("POST", "/v1/apply?dryRun=All", "application/json", body, &planned); err != nil {
				return err
			}
			if len(planned.Applied) != len(objs) {
				return fmt.Errorf("the server's dry run answered %d objects for %d", len(planned.Applied), len(objs))
			}
			for i, a := range planned.Applied {
				objs[i] = &unstructured.Unstructured{Object: a.Object}
			}
			dir, err := os.MkdirTemp("", "jqctl-diff-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			live, merged := filepath.Join(dir, "LIVE"), filepath.Join(dir, "MERGED")
			for _, d := range []string{live, merged} {
				if err := os.Mkdir(d, 0o700); err != nil {
					return err
				}
			}
			for _, u := range objs {
				k, ok := kindOf(u.GetKind())
				if !ok {
					return fmt.Errorf("%s %s: not a kind jqctl can read back", u.GetKind(), u.GetName())
				}
				name := u.GetName()
				if k.Kind == "Configuration" {
					name = "default"
				}
				fname := strings.ToLower(k.Kind) + "." + u.GetNamespace() + "." + name
				want, err := comparable(u)
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(merged, fname), want, 0o600); err != nil {
					return err
				}
				cur := &unstructured.Unstructured{}
				err = c.do("GET", k.path(u.GetNamespace(), name), "", nil, cur)
				if notFound(err) {
					continue
				}
				if err != nil {
					return err
				}
				if k.Kind == "Configuration" {
					delete(cur.Object, "metadata")
				}
				have, err := comparable(cur)
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(live, fname), have, 0o600); err != nil {
					return err
				}
			}
			args := []string{"-u", "-N"}
			prog := "diff"
			if ext := os.Getenv("KUBECTL_EXTERNAL_DIFF"); ext != "" {
				fields := strings.Fields(ext)
				prog, args = fields[0], fields[1:]
			}
			d := exec.CommandContext(cmd.Context(), prog, append(args, live, merged)...)
			d.Stdout, d.Stderr = stdout, cmd.ErrOrStderr()
			err = d.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 1 {
				return exitError{code: 1}
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "manifest file (- for stdin)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the namespace of namespaced objects that name none")
	return cmd
}

// clientVersion is jqctl's version from its build information.
func clientVersion() version.Info {
	v := version.Info{GitVersion: "(devel)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.GoVersion = bi.GoVersion
		if bi.Main.Version != "" {
			v.GitVersion = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.GitCommit = s.Value
			case "vcs.time":
				v.BuildDate = s.Value
			case "GOOS":
				v.Platform = s.Value + v.Platform
			case "GOARCH":
				v.Platform += "/" + s.Value
			}
		}
	}
	return v
}

func versionCmd(stdout io.Writer) *cobra.Command {
	var clientOnly bool
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print jqctl's version and the server's (GET /version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := map[string]any{"clientVersion": clientVersion()}
			var serverErr error
			if !clientOnly {
				var sv version.Info
				if serverErr = newClient(cmd).do("GET", "/version", "", nil, &sv); serverErr == nil {
					out["serverVersion"] = sv
				}
			}
			switch output {
			case "json", "yaml":
				if err := printData(stdout, out, output); err != nil {
					return err
				}
			case "":
				fmt.Fprintf(stdout, "Client Version: %s\n", out["clientVersion"].(version.Info).GitVersion)
				if sv, ok := out["serverVersion"].(version.Info); ok {
					fmt.Fprintf(stdout, "Server Version: %s\n", sv.GitVersion)
				}
			default:
				return fmt.Errorf("--output: want json or yaml, not %q", output)
			}
			return serverErr
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "only jqctl's version")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}
