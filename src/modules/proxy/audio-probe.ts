import { parseBuffer } from 'music-metadata';
import { invalid } from '../../shared/errors.js';
import type { AudioProbe, UploadedFile } from './media-format.js';

/** OpenAI's largest audio upload (25 MB); also the multipart limit of the audio routes. */
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024;

/**
 * The lowest bit rate (bits per second) a file of each container can have: a file's bytes at this rate
 * are the most seconds it can play, which bounds what a provider may report for it (docs/reference.md
 * §5.7). WAV's lowest is 4-bit ADPCM at 8 kHz mono; MP3's 8 kbit/s; every other container is bounded by
 * Opus's lowest rate, 6 kbit/s.
 */
const LOWEST_BIT_RATE: Record<string, number> = { WAVE: 32_000, MPEG: 8_000 };
const DEFAULT_LOWEST_BIT_RATE = 6_000;

/**
 * The highest bit rate assumed for each container, for a file whose length cannot be read: it is held
 * at MAX_AUDIO_BYTES at this rate (docs/reference.md §22 "Unreadable files"). MP3's highest is
 * 320 kbit/s; WAV and FLAC are taken at 16-bit 48 kHz stereo PCM, 1,536 kbit/s; every other container
 * (AAC in MP4, Opus or Vorbis in Ogg and WebM) at 512 kbit/s, about the highest their encoders use.
 */
const HIGHEST_BIT_RATE: Record<string, number> = { MPEG: 320_000, WAVE: 1_536_000, FLAC: 1_536_000 };
const DEFAULT_HIGHEST_BIT_RATE = 512_000;

/** What an unreadable `container` file is held at: MAX_AUDIO_BYTES at its highest bit rate, in whole seconds. */
export const unreadableSecondsOf = (container: string | undefined): number =>
  Math.ceil((MAX_AUDIO_BYTES * 8) / (HIGHEST_BIT_RATE[container ?? ''] ?? DEFAULT_HIGHEST_BIT_RATE));

/**
 * The length of an uploaded audio file, read from its header with music-metadata: the duration the
 * header declares, or, where it gives a bit rate and the file holds clearly more than that, the file's
 * size at that rate (a header that declares less than the file holds does not shorten the hold). A file
 * whose length cannot be read is held at unreadableSecondsOf; a format music-metadata does not know is a 400.
 * `maxSeconds` bounds what a provider may report for it (docs/reference.md §5.7): the file's bytes at its
 * container's lowest bit rate, never less than the hold's seconds.
 */
export async function probeAudio(file: UploadedFile): Promise<AudioProbe> {
  let format;
  try {
    ({ format } = await parseBuffer(
      file.bytes,
      // Read from the bytes alone: the client's file name and type are claims, the content is not.
      { size: file.bytes.length },
      { duration: true, skipCovers: true },
    ));
  } catch {
    throw invalid(
      'The audio file is in a format that cannot be recognised. Supported formats: flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav, webm.',
      'file',
      'invalid_value',
    );
  }
  const declared = typeof format.duration === 'number' && format.duration > 0 ? format.duration : 0;
  const bySize =
    typeof format.bitrate === 'number' && format.bitrate > 0 ? (file.bytes.length * 8) / format.bitrate : 0;
  // The size at the header's rate counts the header's own bytes too: it wins only where the header
  // declares clearly less (more than 1% and a second) than the file holds.
  const seconds = bySize > declared * 1.01 + 1 ? bySize : declared;
  // The most the file's bytes can play at its container's lowest bit rate: what a provider may report.
  const byBytes = Math.ceil(
    (file.bytes.length * 8) / (LOWEST_BIT_RATE[format.container ?? ''] ?? DEFAULT_LOWEST_BIT_RATE),
  );
  if (!Number.isFinite(seconds) || seconds <= 0) {
    const held = unreadableSecondsOf(format.container);
    return { seconds: held, measured: false, maxSeconds: Math.max(held, byBytes) };
  }
  return { seconds: Math.ceil(seconds), measured: true, maxSeconds: Math.max(Math.ceil(seconds), byBytes) };
}
