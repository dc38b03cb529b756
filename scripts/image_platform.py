"""Sets the platform (os, architecture) an image's config declares, in a `docker save` archive on stdin, written to
stdout for `docker load`: for an image whose layers were built for that platform by a builder that labelled it
with the host's (Debian's Docker 20.10 classic builder, run without --platform; see scripts/arm64-image.sh)."""

from __future__ import annotations

import io
import json
import sys
import tarfile


def main(os_name: str, architecture: str) -> None:
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as source, tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as target:
        for member in source:
            data = source.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            # The image config is the archive's top-level <digest>.json; manifest.json and the layers stay as they are.
            if data is not None and member.name.endswith(".json") and "/" not in member.name and member.name != "manifest.json":
                config = json.loads(data)
                config["os"], config["architecture"] = os_name, architecture
                config.pop("variant", None)
                data = json.dumps(config).encode()
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)


if __name__ == "__main__":
    main(*sys.argv[1:3])
