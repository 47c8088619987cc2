#include "dist/grid.h"

namespace mxattn::dist {
namespace {

// Byte offset of (outer, seq, head) in a grid.
int64_t offset_of(const Grid& g, int64_t o, int64_t s, int64_t h) {
  const int64_t cell = g.seq_major ? (o * g.seq + s) * g.heads + h : (o * g.heads + h) * g.seq + s;
  return cell * g.unit;
}

bool continues(const Copy2D& last, const Copy2D& next) {
  return last.width == next.width && last.src_pitch == next.src_pitch &&
         last.dst_pitch == next.dst_pitch &&
         static_cast<const std::byte*>(last.src) + last.height * last.src_pitch == next.src &&
         static_cast<std::byte*>(last.dst) + last.height * last.dst_pitch == next.dst;
}

}  // namespace

void append_box(std::vector<Copy2D>* copies, const Grid& src, Box from, const Grid& dst, Box to,
                int64_t seq_count, int64_t head_count) {
  if (seq_count == 0 || head_count == 0 || src.outer == 0) return;
  // Rows of a 2D copy run along the slower of the two box axes, each row the faster one in full.
  const int64_t rows = src.seq_major ? seq_count : head_count;
  const int64_t width = (src.seq_major ? head_count : seq_count) * src.unit;
  const int64_t src_pitch = (src.seq_major ? src.heads : src.seq) * src.unit;
  const int64_t dst_pitch = (dst.seq_major ? dst.heads : dst.seq) * dst.unit;
  // Copies merge only within this box: another tensor's copies may follow on in memory by chance
  // (adjacent allocations), and one copy must never span two allocations.
  const size_t first = copies->size();
  for (int64_t o = 0; o < src.outer; ++o) {
    Copy2D c;
    c.src = src.data + offset_of(src, o, from.seq, from.head);
    c.dst = dst.data + offset_of(dst, o, to.seq, to.head);
    c.src_pitch = src_pitch;
    c.dst_pitch = dst_pitch;
    c.width = width;
    c.height = rows;
    if (copies->size() > first && continues(copies->back(), c)) {
      copies->back().height += c.height;
    } else {
      copies->push_back(c);
    }
  }
}

}  // namespace mxattn::dist
