// The animation budget, checked from the header before any frame is decoded. Every frame of
// an animation is decoded (and re-encoded for a variant), so besides the pixel budget that
// counts all frames (`max_pixels_mp`), the number of frames is capped too — like pict-rs'
// default of 900 frames — so a file of many tiny frames cannot tie up a render worker.
export const MAX_ANIMATION_FRAMES = 900;

export function frameBudgetMessage(frames: number): string | null {
  return frames > MAX_ANIMATION_FRAMES ? `动画帧数超过上限（${frames} 帧，最多 ${MAX_ANIMATION_FRAMES} 帧）` : null;
}
