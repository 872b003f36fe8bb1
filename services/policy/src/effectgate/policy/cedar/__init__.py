"""The Cedar engine: the schema, entities, context, scoping, and every check a policy text passes."""
