import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The developer console: built into dist/dashboard, served by the service at /dashboard (see
// src/pages/dashboard.router.ts). Vite 8 compiles TSX itself (oxc, automatic React runtime).
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  publicDir: false,
  build: {
    outDir: fileURLToPath(new URL('../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
    reportCompressedSize: false,
  },
  server: { proxy: { '/graphql': { target: 'http://localhost:8080', ws: true } } },
});
