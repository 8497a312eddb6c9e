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
			r := jsonschema.Reflector{FieldNameTag: "yaml", ExpandedStruct: true, RequiredFromJSONSchemaTags: true}
			b, err := json.MarshalIndent(r.Reflect(&configs.Config{}), "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return err
		},
	})
}
