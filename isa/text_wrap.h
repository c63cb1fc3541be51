#pragma once
// Lines of terminal text kept to a bounded width (`compile -v`'s table, `--graphs`' dumps): a long line
// breaks at spaces onto continuation lines under a hanging indent. Nothing is cut or abbreviated, so every
// name stays whole on the screen; only a word longer than a whole line is split.
#include <cstddef>
#include <string>
#include <string_view>

namespace npusim::isa {

// Each line of `text` ('\n'-separated; a final '\n' is kept) in lines of at most `width` characters: a line
// longer than that breaks at its last space that fits (the spaces at the break are dropped) and continues
// on lines that start with `indent` spaces; a word longer than the room left is split where the line ends.
// An indent that leaves fewer than 16 characters of a line continues at 0. width 0: `text` as it is.
std::string wrap_lines(std::string_view text, size_t width, size_t indent);

}  // namespace npusim::isa
