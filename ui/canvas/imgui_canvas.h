#pragma once

// A QOpenGLWidget that draws with Dear ImGui: one ImGui context per canvas,
// Qt input forwarded through ImGuiQtInput, and a frame rendered only when
// something asked for it (input, new data, a resize), never in a loop.
// Subclasses draw in drawFrame() with ImGui's draw lists.

#include <QElapsedTimer>
#include <QOpenGLWidget>

struct ImGuiContext;
struct ImDrawList;
struct ImDrawCmd;

namespace meshscope::ui {

class ImGuiCanvas : public QOpenGLWidget {
    Q_OBJECT
  public:
    explicit ImGuiCanvas(QWidget* parent = nullptr);
    ~ImGuiCanvas() override;

    // Renders one frame now and waits for the GPU (benchmarks); returns the
    // frame's wall time in ms.
    double renderFrameNow();
    // CPU time of the last frame's drawFrame() + ImGui::Render(), in ms.
    double lastDrawMs() const { return m_lastDrawMs; }
    int64_t framesRendered() const { return m_frames; }
    // Vertices in the last frame's draw lists (what the GL side rasterizes).
    int64_t lastVertexCount() const { return m_lastVertices; }
    // The opaque layer on (default) or off (everything blended and textured,
    // as ImGui draws it): benchmarks compare the two in one run.
    void setOpaqueLayerEnabled(bool on) { m_opaqueEnabled = on; }

  signals:
    void frameRendered();

  protected:
    virtual void drawFrame() = 0;
    // What `list` gets between these two calls is drawn as opaque solid
    // colour: no blending, no texture lookup (text would lose its glyphs).
    // Software GL (Mesa llvmpipe) pays for both on every pixel, and a
    // timeline's bars cover most of the canvas.
    void beginOpaqueLayer(ImDrawList* list);
    void endOpaqueLayer(ImDrawList* list);

    void initializeGL() override;
    void paintGL() override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void keyReleaseEvent(QKeyEvent* event) override;
    void leaveEvent(QEvent* event) override;

  private:
    void ensureFonts();
    static void useOpaqueProgram(const ImDrawList* list, const ImDrawCmd* cmd);
    unsigned buildOpaqueProgram(unsigned imguiProgram);

    ImGuiContext* m_context = nullptr;
    QElapsedTimer m_clock;
    qreal m_fontScale = 0;  // device pixel ratio the font atlas was built for
    double m_lastDrawMs = 0;
    int64_t m_frames = 0;
    int64_t m_lastVertices = 0;
    bool m_glReady = false;
    bool m_glES = false;
    unsigned m_opaqueProgram = 0;  // GL program; 0: not built yet
    bool m_opaqueFailed = false;   // shader did not build: draw those items as usual
    bool m_opaqueEnabled = true;
};

}  // namespace meshscope::ui
