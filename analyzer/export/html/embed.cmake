# Turns the HTML report's page and script into C++ string constants (html_assets.cc), so that cumem-analyze
# writes a self-contained file with nothing to find at run time. Run by add_custom_command with -DOUT= -DPAGE= -DJS=.
file(READ "${PAGE}" page)
file(READ "${JS}" js)
file(WRITE "${OUT}.tmp" "// Generated from analyzer/export/html/page.html and report.js by embed.cmake; do not edit.\n"
     "namespace cumemtrace::analyzer {\n"
     "extern const char kHtmlPage[];\nextern const char kHtmlScript[];\n"
     "const char kHtmlPage[] = R\"CUMEMPAGE(${page})CUMEMPAGE\";\n"
     "const char kHtmlScript[] = R\"CUMEMJS(${js})CUMEMJS\";\n"
     "}  // namespace cumemtrace::analyzer\n")
file(RENAME "${OUT}.tmp" "${OUT}")
