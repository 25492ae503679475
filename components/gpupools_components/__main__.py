"""Print the package schema: `cd components && python -m gpupools_components > schema.json`."""

from gpupools_components.provider import schema_text

print(schema_text(), end="")
