package yamljson

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// bigDocument is a scenario-shaped document of n workloads in block style,
// as ../shared/difftest/big-scenario.py writes them.
func bigDocument(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big\ndescription: synthetic load\nsteps:\n- submit:\n")
	for i := range n {
		fmt.Fprintf(&b, `  - apiVersion: kueue.x-k8s.io/v1beta1
    kind: Workload
    metadata:
      name: w%d
      namespace: ns-%d
    spec:
      queueName: lq
      priority: %d
      podSets:
      - name: main
        count: 1
        template:
          spec:
            containers:
            - name: c
              resources:
                requests:
                  cpu: '%d'
                  memory: %dGi
`, i, i%50, i%3*50, 1+i%4, 2*(1+i%4))
	}
	return []byte(b.String())
}

// BenchmarkAppend: Append against sigs.k8s.io/yaml's YAMLToJSON on the
// same 2,000-workload document.
func BenchmarkAppend(b *testing.B) {
	doc := bigDocument(2000)
	b.Run("yamljson", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		var out []byte
		for b.Loop() {
			var err error
			if out, err = Append(out[:0], doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sigs.k8s.io/yaml", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, err := yaml.YAMLToJSON(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
