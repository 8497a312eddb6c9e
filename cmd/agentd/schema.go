package main

import (
	"encoding/json"
	"fmt"

	"github.com/invopop/jsonschema"
	"github.com/spf13/cobra"

	"github.com/agentd/agentd/configs"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the yaml configuration",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := json.MarshalIndent(configSchema(), "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return err
		},
	})
}

// configSchema is the JSON Schema of the yaml configuration, reflected from
// configs.Config. A model may also be written as its id alone
// (configs.Model's UnmarshalYAML), which reflection cannot see.
func configSchema() *jsonschema.Schema {
	r := jsonschema.Reflector{FieldNameTag: "yaml", ExpandedStruct: true, RequiredFromJSONSchemaTags: true}
	s := r.Reflect(&configs.Config{})
	if m, ok := s.Definitions["Model"]; ok {
		s.Definitions["Model"] = &jsonschema.Schema{OneOf: []*jsonschema.Schema{{Type: "string", Description: "the model's id alone"}, m}}
	}
	return s
}
