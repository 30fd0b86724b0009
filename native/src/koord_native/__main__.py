"""``python -m koord_native``: print this machine's RDT capabilities as JSON."""

import json

from koord_native import rdt_capabilities

print(json.dumps(rdt_capabilities().as_dict(), indent=2))
