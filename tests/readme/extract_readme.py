#!/usr/bin/env python3
"""Writes README.md's ```cpp blocks, in order, as one translation unit to compile.

The blocks tell one story (the telemetry block reads the `feed` the loader block made), so they
become one function body, with their #include lines hoisted to the top. The names the README leaves
to the reader (my_stream, step, grid, block) come from readme_prelude.hpp. For the C++ compiler
(--host) a kernel launch `f<<<...>>>(args)` is compiled as the call f(args) of a host function of
the same signature; for nvcc (a .cu output) the text is left exactly as written. Blocks fenced
```cpp cuda use CUDA-only headers: they are compiled by nvcc only.

usage: extract_readme.py README.md OUT [--host]
"""
import re
import sys


def main() -> int:
    readme, out = sys.argv[1], sys.argv[2]
    host = "--host" in sys.argv[3:]
    text = open(readme, encoding="utf-8").read()
    fenced = re.findall(r"^```cpp( cuda)?\n(.*?)^```", text, flags=re.S | re.M)
    blocks = [b for cuda, b in fenced if not (host and cuda)]
    if not blocks:
        print(f"{readme}: no ```cpp block", file=sys.stderr)
        return 1
    includes, body = [], []
    for n, b in enumerate(blocks, 1):
        body.append(f"  // README.md ```cpp block {n}")
        for line in b.splitlines():
            if line.startswith("#include"):
                includes.append(line)
            else:
                if host:
                    line = re.sub(r"<<<.*?>>>", "", line)
                body.append("  " + line if line else "")
    with open(out, "w", encoding="utf-8") as f:
        f.write("// Generated from README.md by tests/readme/extract_readme.py: do not edit.\n")
        f.write("\n".join(includes) + "\n")
        f.write('#include "readme_prelude.hpp"\n\n')
        f.write("// Compiled, not run: the shards the README names do not exist here.\n")
        f.write("[[maybe_unused]] static void readme_blocks() {\n")
        f.write("  using namespace readme_prelude;\n")
        f.write("\n".join(body) + "\n}\n\n")
        f.write('#include <cstdio>\nint main() { std::puts("README.md\'s C++ blocks compiled"); }\n')
    return 0


if __name__ == "__main__":
    sys.exit(main())
